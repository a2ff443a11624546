"""One target format in the action record (issue 43): every action about an object names it by its key,
`group/version/plural/namespace/name` (a reconcile, a suspension, and now an admission decision too), the form the
console links with and the `target` filter suggests. Admission decisions recorded before named it
`Kind namespace/name`; `target` is hashed into the action record's chain, so those rows are not rewritten: the
filter matches a prefix in either form in both, and the chain still verifies."""

from __future__ import annotations

import uuid

import pytest

from opsconsole.accounts.action_records import action_record, action_record_list, admission_decisions
from opsconsole.accounts.targets import target_example, target_forms
from opsconsole.webhooks.recorder import decision_record
from reconcilers.engine.admission import review_validate
from reconcilers.engine.audit import actions_verify
from reconcilers.kinds.memcached import MemcachedReconciler
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db
KEY = "cache.example.com/v1alpha1/memcacheds/"
TENANTS = "tenancy.example.com/v1alpha1/tenants/"


def decide(namespace: str, name: str) -> None:
    review = {"request": {"uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": namespace, "name": name,
                          "userInfo": {"username": "alice"},
                          "object": {"metadata": {"name": name, "namespace": namespace}, "spec": {"size": 1}}}}
    decision_record(review_validate(MemcachedReconciler(), review), "/validate/cache.example.com/memcacheds")


def test_a_prefix_in_one_form_has_its_other_form_for_registered_kinds():
    assert target_forms(f"{KEY}team-a/cache") == [f"{KEY}team-a/cache", "Memcached team-a/cache"]
    assert target_forms(f"{KEY}team-a/") == [f"{KEY}team-a/", "Memcached team-a/"]
    assert target_forms(f"{KEY}team") == [f"{KEY}team", "Memcached team"]
    assert target_forms("Memcached team-a/") == ["Memcached team-a/", f"{KEY}team-a/"]
    assert target_forms("Memcached") == ["Memcached", KEY]
    assert target_forms(f"{TENANTS}/acme") == [f"{TENANTS}/acme", "Tenant acme"]  # cluster-scoped
    assert target_forms("Tenant acme") == ["Tenant acme", f"{TENANTS}/acme"]
    for other in ("user:alice", "audit chains", "Unknown team/x", "no.such/v1/things/ns/x", ""):
        assert target_forms(other) == [other]


def test_every_action_about_an_object_names_it_by_its_key_and_old_rows_are_found_unchanged():
    res = f.resource("web", "team-a")
    old = action_record(action="admission.validate", method="CREATE", path="/validate", status_code=200,
                        actor="bob", auth="kubernetes", target="Memcached team-a/web")  # as recorded before
    decide("team-a", "web")
    action_record(action="resource.reconcile", method="POST", path=f"/api/v1/resources/{res.pk}/reconcile",
                  status_code=202, actor="carol", auth="token", target=res.key)
    decide("team-b", "web")  # another object's
    assert res.key == f"{KEY}team-a/web"
    new = action_record_list(action="admission.validate", target=f"{KEY}team-a/web").exclude(pk=old.pk).get()
    assert new.target == res.key
    for prefix in (res.key, f"{KEY}team-a/", "Memcached team-a/web", "Memcached team-a/"):
        found = set(action_record_list(target=prefix).values_list("actor", flat=True))
        assert found == {"bob", "alice", "carol"}, prefix
    assert {r.actor for r in admission_decisions("Memcached", "team-a", "web", key=res.key)} == {"bob", "alice"}
    assert actions_verify() == []  # nothing rewritten: the chain holds


def test_the_audit_pages_target_filter_suggests_the_key_form(as_role):
    assert target_example().count("/") == 4 and " " not in target_example()
    page = as_role("admin").get("/audit/?view=actions").content.decode()
    assert f'placeholder="{target_example()}"' in page and 'placeholder="Memcached' not in page
