"""`GET /api/v1/resources/{id}/revisions`: the spec revisions with actor and diff, a diff between two
generations, namespace limits."""

from __future__ import annotations

from django.utils import timezone

from reconcilers.engine import recording
from reconcilers.models import Resource
from tests.opsconsole.api import factories as f


def revise(res: Resource, generation: int, spec: dict, manager: str, time: str) -> None:
    """Record the revision of `generation` as the engine would, written by field manager `manager`."""
    fields = {"f:spec": {f"f:{k}": {} for k in spec}}
    live = {"metadata": {"uid": res.uid, "generation": generation, "resourceVersion": str(100 + generation),
                         "managedFields": [{"manager": manager, "operation": "Update", "time": time,
                                            "fieldsType": "FieldsV1", "fieldsV1": fields}]},
            "spec": spec}
    recording.revision_record(res, live, timezone.now())
    res.save()


def test_the_revisions_with_actor_and_diff_newest_first(viewer):
    res = f.resource("rv")
    revise(res, 1, {"size": 1}, "kubectl-client-side-apply", "2030-01-01T00:00:00Z")
    revise(res, 2, {"size": 4}, "kubectl-edit", "2030-01-01T00:01:00Z")
    body = viewer.get(f"/api/v1/resources/{res.pk}/revisions").json()
    rows = body["results"]
    assert [(r["generation"], r["actor"], r["operation"]) for r in rows] == [
        (2, "manager:kubectl-edit", "Update"), (1, "manager:kubectl-client-side-apply", "Update")]
    assert rows[0]["diff"] == [{"path": "/size", "op": "replace", "old": 1, "new": 4}]
    assert rows[0]["managers"][0]["manager"] == "kubectl-edit" and rows[0]["spec"] == {"size": 4}
    compared = viewer.get(f"/api/v1/resources/{res.pk}/revisions?from=1&to=2").json()["compare"]
    assert compared == {"from": 1, "to": 2, "diff": [{"path": "/size", "op": "replace", "old": 1, "new": 4}]}
    assert viewer.get(f"/api/v1/resources/{res.pk}/revisions?from=1&to=9").status_code == 400


def test_revisions_are_limited_to_ones_namespaces(as_user):
    res = f.resource("hidden", namespace="team-b")
    limited = as_user("viewer", ["team-a"])
    assert limited.get(f"/api/v1/resources/{res.pk}/revisions").status_code == 404
    assert limited.get("/api/v1/resources/999999/revisions").status_code == 404
    assert as_user("viewer", ["team-b"]).get(f"/api/v1/resources/{res.pk}/revisions").json()["results"] == []
