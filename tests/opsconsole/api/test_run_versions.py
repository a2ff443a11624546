"""`GET /api/v1/runs/versions`: each version's fields, `since` as RFC 3339 or seconds, `kind`, the caller's
namespaces; any role reads it, nobody else; a bad `since` or `kind` is a 400 naming the field."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from reconcilers.models import ReconcileRun
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db

URL = "/api/v1/runs/versions"
FIELDS = {"version", "runs", "error_runs", "error_rate", "highest_error_rate", "duration_p50_seconds",
          "duration_p95_seconds", "objects", "failed_transitions", "anomalies", "ready_objects",
          "time_to_ready_p50_seconds", "time_to_ready_p95_seconds"}


def run(res, version: str, *, result: str = "success", ago: float = 60, duration: float = 0.5) -> None:
    ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, duration_seconds=duration, result=result,
                                started_at=timezone.now() - timedelta(seconds=ago), operator_version=version)


def test_each_version_has_its_figures_and_the_worse_one_is_named(viewer):
    res = f.resource("a")
    run(res, "v1")
    run(res, "v1")
    run(res, "v2", result="error", duration=3.0)
    body = viewer.get(URL).json()
    assert set(body) == {"since", "until", "kind", "runs_read", "capped", "cap", "highest_error_rate", "versions"}
    assert (body["kind"], body["runs_read"], body["capped"], body["highest_error_rate"]) == ("", 3, False, "v2")
    v1, v2 = body["versions"]
    assert set(v1) == FIELDS
    assert (v1["version"], v1["runs"], v1["error_rate"], v1["highest_error_rate"]) == ("v1", 2, 0.0, False)
    assert (v2["version"], v2["error_runs"], v2["error_rate"], v2["duration_p95_seconds"]) == ("v2", 1, 1.0, 3.0)
    assert v2["highest_error_rate"] is True and v2["objects"] == 1 and v2["time_to_ready_p50_seconds"] is None


def test_since_takes_seconds_or_an_rfc3339_time_and_kind_narrows(viewer):
    res, tenant = f.resource("a"), f.resource("t", kind=f.TENANT)
    run(res, "v1", ago=600)
    run(res, "v2", ago=30)
    run(tenant, "v2", ago=30)
    versions = lambda body: {v["version"]: v["runs"] for v in body["versions"]}  # noqa: E731
    assert versions(viewer.get(URL, {"since": "120"}).json()) == {"v2": 2}
    moment = (timezone.now() - timedelta(minutes=15)).isoformat()
    assert versions(viewer.get(URL, {"since": moment}).json()) == {"v1": 1, "v2": 2}
    assert versions(viewer.get(URL, {"since": moment.replace("+00:00", "Z")}).json()) == {"v1": 1, "v2": 2}
    narrowed = viewer.get(URL, {"kind": "memcacheds"}).json()
    assert narrowed["kind"] == "Memcached" and versions(narrowed) == {"v1": 1, "v2": 1}


@pytest.mark.parametrize(("params", "field"), [
    ({"since": "yesterday"}, "since"), ({"since": "0"}, "since"), ({"since": "-5"}, "since"),
    ({"since": "2020-01-01T00:00:00"}, "since"),  # no offset
    ({"since": (timezone.now() + timedelta(hours=1)).isoformat()}, "since"),
    ({"since": str(91 * 86400)}, "since"), ({"kind": "Unicorn"}, "kind"),
])
def test_a_bad_since_or_kind_is_a_400_naming_the_field(viewer, params, field):
    response = viewer.get(URL, params)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and set(body["fields"]) == {field}


def test_any_role_reads_it_a_user_without_one_or_anonymous_does_not(as_user):
    for role in ("viewer", "operator", "admin"):
        assert as_user(role).get(URL).status_code == 200
    assert as_user(None).get(URL).status_code == 403
    assert as_user("viewer", token=True).get(URL).status_code == 200
    anonymous = APIClient().get(URL)
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "not_authenticated"


def test_a_caller_limited_to_namespaces_gets_their_figures_only(as_user):
    run(f.resource("mine"), "v1")
    run(f.resource("theirs", namespace="secret"), "v2", result="error")
    body = as_user("viewer", ["default"]).get(URL).json()
    assert [v["version"] for v in body["versions"]] == ["v1"] and body["highest_error_rate"] is None


def test_hostile_values_are_400s_never_5xx(viewer):
    for value in ["\x00", "a\x00b", "%", "\u202e\u0644\u0627", "🔥" * 300, "x" * 5000, "1e999", "9" * 400,
                  "2026-13-45T99:00:00Z", "[]"]:
        for param in ("since", "kind"):
            response = viewer.get(URL, {param: value})
            assert response.status_code == 400, (param, value, response.content[:200])
            assert param in response.json()["fields"]
