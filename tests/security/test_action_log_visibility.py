"""The action log as an admin limited to one namespace reads it, in the API (`GET /api/v1/actions`, filters
included) and the console (`/audit/?view=actions`): only the records about objects in that namespace (a
resource's key, an admission decision, a bulk reconcile there) and about themselves (their own requests, their
tokens, their logins); never another namespace's reasons and decisions, another user's token creations or
logins, or the command line's records. An unlimited admin reads every record; a superuser's token capped to
viewer reads none."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client

from opsconsole.accounts.action_records import action_record
from opsconsole.accounts.tokens import token_create
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def _records(tag: str, me: str) -> dict[str, bool]:
    """Records of every target form, each with a reason naming it: True where `me` (limited to team-a) may
    read it."""
    forms = {
        "cache.example.com/v1alpha1/memcacheds/team-a/mc": True,
        "cache.example.com/v1alpha1/memcacheds/team-b/mc": False,
        "/v1/pods/team-a/p": True,
        "cache.example.com/v1alpha1/memcacheds/team-ab/mc": False,
        "Memcached team-a/mc": True,
        "Memcached team-b/mc": False,
        "Memcached team-a-x/mc": False,
        "Tenant acme": False,  # cluster-scoped: needs the cluster scope
        "kind=Memcached selector=app=web phase= ns=team-a": True,
        "kind=Memcached selector=ns=team-a phase= ns=team-b": False,
        "kind=Memcached selector= phase= ns=": False,
        f"user:{me}": True,
        me: True,
        "user:someone-else": False,
        "someone-else": False,
        "audit chains": False,
        "resource:12": False,
    }
    for target in forms:
        action_record(action="resource.reconcile", method="POST", path="/x", status_code=202, actor="other",
                      auth="session", target=target, reason=f"{tag}|{target}")
    action_record(action="audit.verify", method="POST", path="/audit/verify", status_code=202, actor=me,
                  auth="session", target="audit chains", reason=f"{tag}|own request")
    action_record(action="token.create", method="CLI", path="manage.py token create", status_code=201, actor=me,
                  auth="command", target="user:nobody", reason=f"{tag}|command as me")
    return {**forms, "own request": True, "command as me": False}


def _seen(reasons: list[str], tag: str) -> set[str]:
    return {r.split("|", 1)[1] for r in reasons if r.startswith(f"{tag}|")}


def test_a_namespace_limited_admin_reads_only_their_namespaces_action_records_in_the_api_and_the_console():
    tag = uuid.uuid4().hex[:8]
    limited = f.user(f"lim-{tag}", "admin", ["team-a"])
    expected = _records(tag, limited.username)
    visible = {t for t, shown in expected.items() if shown}

    api = Client()
    api.force_login(limited)
    reasons = [r["reason"] for r in api.get("/api/v1/actions", {"page_size": 200}).json()["results"]]
    assert _seen(reasons, tag) == visible
    for target in ("Memcached team-b/", "cache.example.com/v1alpha1/memcacheds/team-b/", "user:someone-else"):
        assert api.get("/api/v1/actions", {"target": target}).json()["results"] == [], target
    assert api.get("/api/v1/actions", {"target": "Memcached team-a/"}).json()["results"]

    page = api.get("/audit/", {"view": "actions"}).content.decode()
    assert all(f"{tag}|{t}" not in page for t, shown in expected.items() if not shown)
    assert f"{tag}|Memcached team-a/mc" in page
    filtered = api.get("/audit/", {"view": "actions", "target": "Memcached team-b/"}).content.decode()
    assert f"{tag}|Memcached team-b" not in filtered

    unlimited = Client()
    unlimited.force_login(f.user(f"all-{tag}", "admin"))
    everything = [r["reason"] for r in unlimited.get("/api/v1/actions", {"page_size": 200}).json()["results"]]
    assert _seen(everything, tag) == set(expected)


def test_the_cluster_scope_shows_cluster_scoped_objects_records():
    tag = uuid.uuid4().hex[:8]
    cluster_admin = f.user(f"cs-{tag}", "admin", [""])
    for target in ("Tenant acme", "example.com/v1/tenants//acme", "Memcached team-a/mc", "audit chains",
                   "kind=Tenant selector= phase= ns="):
        action_record(action="admission.validate", method="POST", path="/validate", status_code=200,
                      actor="kube", auth="kubernetes", target=target, reason=f"{tag}|{target}")
    client = Client()
    client.force_login(cluster_admin)
    reasons = [r["reason"] for r in client.get("/api/v1/actions", {"page_size": 200}).json()["results"]]
    assert _seen(reasons, tag) == {"Tenant acme", "example.com/v1/tenants//acme"}


def test_a_superusers_viewer_token_reads_no_action_record():
    root = User.objects.create_superuser(f"root-{uuid.uuid4().hex[:6]}", password="pw")
    secret = token_create(root, name="read-only", role="viewer").secret
    assert Client().get("/api/v1/actions", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 403


def test_an_action_by_id_outside_ones_namespaces_names_no_namespace_in_ones_own_record(queue):
    tag = uuid.uuid4().hex[:8]
    limited = f.user(f"lim-{tag}", "admin", ["team-a"])
    hidden = f.resource(f"hidden-{tag}", f"secret-ns-{tag}")
    client = Client()
    client.force_login(limited)
    response = client.post(f"/api/v1/resources/{hidden.pk}/reconcile", {"reason": tag},
                           content_type="application/json")
    assert response.status_code == 404
    own = client.get("/api/v1/actions", {"actor": limited.username}).json()["results"]
    assert own and own[0]["target"] == f"resource:{hidden.pk}"
    assert f"secret-ns-{tag}" not in client.get("/api/v1/actions", {"page_size": 200}).content.decode()
