"""The detail page's Admission decisions panel: the webhooks' decisions about the object, newest first, with the
Kubernetes user, the operation, dry runs and the reasons of a refusal; shown to admins only (they name Kubernetes
users and groups, as the action record does); absent for others. A refused create (no resource ever existed) is
found on the audit log's actions view and in /api/v1/actions under its key (`target`)."""

from __future__ import annotations

import uuid

import pytest

from opsconsole.webhooks.recorder import decision_record
from reconcilers.engine.admission import review_validate
from reconcilers.kinds.memcached import MemcachedReconciler
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db
KEY = "cache.example.com/v1alpha1/memcacheds/"  # a decision names its object by its key, as every action does


def decide(namespace: str, name: str, spec: dict, *, dry_run: bool = False, user: str = "alice") -> None:
    review = {"request": {"uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": namespace, "name": name,
                          "dryRun": dry_run, "userInfo": {"username": user, "groups": ["devs"]},
                          "object": {"metadata": {"name": name, "namespace": namespace}, "spec": spec}}}
    decision_record(review_validate(MemcachedReconciler(), review), "/validate/cache.example.com/memcacheds")


def test_admins_see_the_decisions_about_the_object_and_others_do_not(as_role):
    res = f.resource("cache", "team-a")
    decide("team-a", "cache", {"size": -1}, user="mallory")
    decide("team-a", "cache", {"size": 1}, dry_run=True)
    decide("team-a", "cache", {"size": 2})
    decide("team-a", "other", {"size": -5})  # another object's
    page = as_role("admin").get(f"/resources/{res.pk}/").content.decode()
    assert 'id="admission-decisions"' in page
    rows = page.split('id="admission-decisions"')[1].split("</table>")[0]
    assert rows.count("<tr>") == 4  # the header and three decisions, not the other object's
    assert "mallory" in rows and "spec.size: must be at least 0" in rows and "refused" in rows
    assert "dry run" in rows and rows.index("admitted") < rows.index("mallory")  # newest first
    viewer = as_role("viewer", ["team-a"]).get(f"/resources/{res.pk}/").content.decode()
    assert "admission-decisions" not in viewer and "mallory" not in viewer


def test_an_object_without_decisions_says_so_to_an_admin(as_role):
    res = f.resource("quiet", "team-b")
    page = as_role("admin").get(f"/resources/{res.pk}/").content.decode()
    assert "No admission decision is on record for this object" in page


def test_a_refused_create_of_an_object_that_never_existed_is_found_under_its_kind_and_name(as_role):
    decide("team-c", "never", {"size": 500}, user="eve")
    decide("team-c", "kept", {"size": 1})
    decide("team-d", "never", {"size": 1})
    admin = as_role("admin")
    page = admin.get(f"/audit/?view=actions&target={KEY}team-c/never").content.decode()
    assert "eve" in page and "spec.size: must be at most 100" in page
    assert f"{KEY}team-c/kept" not in page and f"{KEY}team-d/never" not in page
    namespace = admin.get(f"/audit/?view=actions&target={KEY}team-c/").content.decode()
    assert f"{KEY}team-c/never" in namespace and f"{KEY}team-c/kept" in namespace
    api = admin.get("/api/v1/actions", {"target": f"{KEY}team-c/never"}).json()
    (row,) = api["results"]
    assert admin.get("/api/v1/actions", {"target": "Memcached team-c/never"}).json()["results"] == [row]
    assert (row["actor"], row["action"], row["outcome"]) == ("eve", "admission.validate", "rejected")
    too_long = admin.get("/api/v1/actions", {"target": "x" * 600})
    assert too_long.status_code == 400 and "target" in too_long.json()["fields"]
    assert as_role("viewer", ["team-c"]).get("/api/v1/actions", {"target": "Memcached team-c/"}).status_code == 403


def test_the_panel_links_to_the_objects_decisions_in_the_audit_log(as_role):
    res = f.resource("linked", "team-e")
    decide("team-e", "linked", {"size": 1})
    page = as_role("admin").get(f"/resources/{res.pk}/").content.decode()
    assert f"?view=actions&amp;target={KEY}team-e/linked" in page


def test_each_decision_shows_its_caller_and_a_status_write_its_subresource(as_role):
    res = f.resource("seen", "team-c")
    review = {"request": {"uid": str(uuid.uuid4()), "operation": "UPDATE", "namespace": "team-c", "name": "seen",
                          "subResource": "status", "userInfo": {"username": "dana"},
                          "object": {"metadata": {"name": "seen", "namespace": "team-c"},
                                     "status": {"phase": "Failed"}}}}
    decision = review_validate(MemcachedReconciler(), review)
    decision.peer_address, decision.peer_cn = "10.1.2.3", "kube-apiserver"
    decision_record(decision, "/validate/cache.example.com/memcacheds")
    rows = as_role("admin").get(f"/resources/{res.pk}/").content.decode().split('id="admission-decisions"')[1]
    rows = rows.split("</table>")[0]
    assert "kube-apiserver" in rows and "from 10.1.2.3" in rows and "/status" in rows and "dana" in rows
