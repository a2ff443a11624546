"""Issue 37, unit level: the engine recognises its own writes by what they returned, never by a field-manager
name (`provenance`, `step.out_of_band`), and every actor it records says how it was established: the user the API
server authenticated for a signed admitted write (`kube:<user>`), else the field manager as a claim, and a
deletion without one is `unknown`. Written as the attacks: a name borrowed from the engine proves nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.conf import settings

from reconcilers.core import actors, meta
from reconcilers.core.meta import FIELD_MANAGER, RECONCILE_REQUESTED_AT, ROLLBACK_FIELD_MANAGER, now_rfc3339, rfc3339
from reconcilers.engine import admitted, provenance, recording, step
from reconcilers.engine.recording import Deletion, resource_deletions_record
from reconcilers.models import ActionRecord, Resource, SpecRevision, Transition
from tests.reconcilers.audit_support import KIND, observed, record
from tests.reconcilers.engine.test_audit_completeness import PHASE, T1, T2, _Ctx, entry, live_obj
from tests.reconcilers.engine.test_recording_deletion import Plain, api_object

ANNOTATION = {"f:metadata": {"f:annotations": {f"f:{RECONCILE_REQUESTED_AT}": {}}}}


@pytest.fixture
def admitted_redis():
    """The Redis the webhook server notes admitted writes in (settings.REDIS_URL), emptied of them after."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    for key in client.scan_iter(f"{admitted.PREFIX}*"):
        client.delete(key)


def admit(client: Any, obj: dict[str, Any], username: str, *, operation: str = "UPDATE", subresource: str = "",
          secret: str | None = None) -> None:
    """What the webhook server does for an admitted write of `obj` (the object as written) by `username`."""
    request = {"operation": operation, "subResource": subresource, "userInfo": {"username": username},
               "namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"],
               ("oldObject" if operation == "DELETE" else "object"): obj}
    admitted.admitted_note(client, admitted.signing_key(settings.SECRET_KEY if secret is None else secret),
                           KIND.group, KIND.kind, obj["metadata"]["namespace"], obj["metadata"]["name"],
                           admitted.entry_from_request(request))


# -- the engine's own status writes ------------------------------------------------------------------------------


def test_a_status_forged_under_the_engines_name_is_out_of_band_not_caught_up():
    forged = live_obj(status={"phase": "Degraded", "reason": "Forged"},
                      managed=[entry(FIELD_MANAGER, PHASE, T1, subresource="status")])
    found = step.out_of_band(forged, "Running")  # the old rule: None (is_ours), and the catch-up recorded it
    assert found is not None and found.manager == FIELD_MANAGER
    assert found.actor == f"manager:{FIELD_MANAGER}" and actors.established(found.actor) == "claim"
    decision = step._decide(_Ctx(forged, "Running"), "Running", foreign=True)
    assert (decision.queue, decision.change.to_phase) == (step.QueueAction.FORGET, "Running")  # no catch-up
    assert not hasattr(meta, "is_ours")


def test_only_the_phase_the_engines_own_write_returned_is_the_engines():
    live = live_obj(status={"phase": "Degraded"})  # resourceVersion 101
    assert provenance.wrote_it(("101", "Degraded"), live)  # the write's own answer
    assert provenance.wrote_it(("99", "Degraded"), live)  # a later metadata-only write left the phase
    assert not provenance.wrote_it(("101", "Running"), live)  # someone wrote another phase since
    assert not provenance.wrote_it(("102", "Degraded"), live)  # a note from the future: not this object's
    assert not provenance.wrote_it(None, live)


def test_a_note_is_written_and_read_per_object_and_a_forged_one_proves_nothing(admitted_redis):
    admitted_redis.delete(f"{provenance.WROTE_PREFIX}uid-n")
    live = live_obj("uid-n", status={"phase": "Degraded"})
    check = provenance.engine_wrote_checker(admitted_redis)
    assert not check(live)
    provenance.note_written(admitted_redis, "uid-n", "101", "Degraded")
    assert check(live)
    assert not check(live_obj("uid-other", status={"phase": "Degraded"}))
    # someone who can write to Redis but does not hold the secret cannot make a phase the engine's
    admitted_redis.set(f"{provenance.WROTE_PREFIX}uid-n", "101 0123456789abcdef0123456789abcdef Degraded")
    assert not check(live)
    admitted_redis.set(f"{provenance.WROTE_PREFIX}uid-n", "101 Degraded")
    assert not check(live)
    admitted_redis.delete(f"{provenance.WROTE_PREFIX}uid-n")


# -- requests, revisions, suspensions and deletions: admission or a claim ---------------------------------------------


@pytest.mark.django_db
def test_a_reconcile_annotation_under_the_engines_name_is_a_request_with_a_claim(admitted_redis):
    key = KIND.request("default", "m-uid-q").key()
    annotated = live_obj("uid-q", annotations={RECONCILE_REQUESTED_AT: "t1"},
                         managed=[entry(FIELD_MANAGER, ANNOTATION, T2)])
    row = recording.annotation_request_ensure(key, annotated, RECONCILE_REQUESTED_AT, "t1")  # old: None
    assert row is not None and row.actor == f"manager:{FIELD_MANAGER}"
    action = ActionRecord.objects.get(target=key)
    assert (action.actor, action.auth, action.detail["established"]) == (
        f"manager:{FIELD_MANAGER}", provenance.AUTH_CLAIM, "claim")


@pytest.mark.django_db
def test_an_admitted_annotation_names_the_kubernetes_user(admitted_redis):
    key = KIND.request("default", "m-uid-k").key()
    annotated = live_obj("uid-k", annotations={RECONCILE_REQUESTED_AT: "t9"},
                         managed=[entry(FIELD_MANAGER, ANNOTATION, now_rfc3339())])
    admit(admitted_redis, annotated, "alice@example.com")
    row = recording.annotation_request_ensure(key, annotated, RECONCILE_REQUESTED_AT, "t9")
    assert row.actor == "kube:alice@example.com"
    action = ActionRecord.objects.get(target=key)
    assert (action.actor, action.auth, action.detail["admitted"]["user"]["username"]) == (
        "kube:alice@example.com", provenance.AUTH_ADMISSION, "alice@example.com")


@pytest.mark.django_db
def test_an_admitted_entry_with_a_bad_signature_is_ignored(admitted_redis):
    key = KIND.request("default", "m-uid-b").key()
    annotated = live_obj("uid-b", annotations={RECONCILE_REQUESTED_AT: "t8"},
                         managed=[entry("kubectl-annotate", ANNOTATION, now_rfc3339())])
    admit(admitted_redis, annotated, "system:admin", secret="not-the-installations-secret")
    row = recording.annotation_request_ensure(key, annotated, RECONCILE_REQUESTED_AT, "t8")
    assert row.actor == "manager:kubectl-annotate"
    assert ActionRecord.objects.get(target=key).auth == provenance.AUTH_CLAIM


@pytest.mark.django_db
def test_a_spec_under_the_rollback_field_manager_is_not_credited_to_a_rollback(admitted_redis):
    record(observed("uid-s"), "Running")
    resource = Resource.objects.get(uid="uid-s")
    spec = {"size": 5}
    live = live_obj("uid-s", generation=2, spec=spec,
                    managed=[entry(ROLLBACK_FIELD_MANAGER, {"f:spec": {"f:size": {}}}, now_rfc3339())])
    row = recording.revision_row(resource, live, resource.phase_since, {"size": 3})
    assert row.actor == f"manager:{ROLLBACK_FIELD_MANAGER}" and actors.established(row.actor) == "claim"
    # the generation a rollback's own write returned is the rollback's, whatever field manager it names
    resource.rollback = {"actor": "rollback:auto", "generation": 2}
    assert recording.revision_row(resource, live, resource.phase_since, {"size": 3}).actor == "rollback:auto"
    resource.rollback = {"actor": "rollback:auto", "generation": 1}
    assert recording.revision_row(resource, live, resource.phase_since, {"size": 3}).actor.startswith("manager:")
    # an admitted write of exactly that spec names its user
    admit(admitted_redis, live, "bob")
    resource.rollback = None
    row = recording.revision_row(resource, live, resource.phase_since, {"size": 3})
    assert row.actor == "kube:bob" and row.managers[0]["manager"] == ROLLBACK_FIELD_MANAGER  # the claim, kept
    assert not SpecRevision.objects.filter(resource_uid="uid-s", actor__startswith="rollback:").exists()


@pytest.mark.django_db
def test_a_deletion_without_admission_is_unknown_never_the_controller(admitted_redis):
    record(observed("uid-d"), "Running")
    resource_deletions_record([Deletion(Plain(), "uid-d", api_object("uid-d"))])
    assert set(Transition.objects.filter(resource_uid="uid-d", reason="ObjectDeleted")
               .values_list("actor", flat=True)) == {"unknown"}


@pytest.mark.django_db
def test_an_admitted_deletion_names_the_kubernetes_user(admitted_redis):
    record(observed("uid-e"), "Running")
    admit(admitted_redis, api_object("uid-e"), "carol", operation="DELETE")
    resource_deletions_record([Deletion(Plain(), "uid-e", api_object("uid-e"))])
    assert set(Transition.objects.filter(resource_uid="uid-e", reason="ObjectDeleted")
               .values_list("actor", flat=True)) == {"kube:carol"}


def test_an_out_of_band_phase_admitted_by_the_api_server_names_its_user(admitted_redis):
    forged = live_obj("uid-o", status={"phase": "Degraded", "reason": "Forged"},
                      managed=[entry(FIELD_MANAGER, PHASE, now_rfc3339(), subresource="status")])
    actor, found = provenance.status_actor(KIND, forged, "Degraded", FIELD_MANAGER)
    assert (actor, found) == (f"manager:{FIELD_MANAGER}", None)
    admit(admitted_redis, forged, "dave", subresource="status")
    assert provenance.status_actor(KIND, forged, "Degraded", FIELD_MANAGER)[0] == "kube:dave"
    assert provenance.status_actor(KIND, forged, "Running", FIELD_MANAGER)[0] == f"manager:{FIELD_MANAGER}"


def test_an_admitted_entry_older_than_the_write_is_not_taken_for_it(admitted_redis):
    earlier = live_obj("uid-t", status={"phase": "Degraded"})
    admit(admitted_redis, earlier, "henry", subresource="status")  # henry wrote Degraded long before
    later = rfc3339(datetime.now(UTC) + timedelta(minutes=10))  # someone without an admitted write, later
    forged = live_obj("uid-t", status={"phase": "Degraded"},
                      managed=[entry("kubectl-patch", PHASE, later, subresource="status")])
    assert provenance.status_actor(KIND, forged, "Degraded", "kubectl-patch")[0] == "manager:kubectl-patch"
