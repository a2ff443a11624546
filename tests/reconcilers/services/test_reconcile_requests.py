"""reconcile_request_create: a row, the annotation with a fresh token, an immediate enqueue; the run that
handles it finishes the request."""

from __future__ import annotations

import pytest
from django.db import transaction

from reconcilers.core.meta import RECONCILE_REQUESTED_AT
from reconcilers.core.types import Request
from reconcilers.engine import kube, runner
from reconcilers.models import ReconcileRequest, RequestState
from reconcilers.services.reconcile_requests import (
    IdempotencyConflict,
    ObjectNotFound,
    ReconcileRequestError,
    reconcile_request_create,
)
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def key(kapi, namespace, workqueue, reconcilers):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    kube.create_object(kapi, GADGET, gadget(namespace, "g", mode="ok"))
    return GADGET.request(namespace, "g").key()


def annotation(kapi, key):
    req = Request.from_key(key)
    obj = kube.get_object(kapi, GADGET, req.namespace, req.name)
    return (obj["metadata"].get("annotations") or {}).get(RECONCILE_REQUESTED_AT), obj


def test_it_records_the_request_sets_the_annotation_and_enqueues_at_once(key, kapi, workqueue):
    request = reconcile_request_create(key, actor="user:alice", reason="cache looks stale")
    assert (request.state, request.actor, request.reason, request.key) == (
        RequestState.REQUESTED, "user:alice", "cache looks stale", key)
    token, _ = annotation(kapi, key)
    assert token == request.token
    assert workqueue.sent.keys == [key]


def test_the_run_that_handles_it_echoes_the_token_and_finishes_it(key, kapi):
    request = reconcile_request_create(key, actor="user:alice", reason="why not")
    assert runner.run(key) == "success"
    request.refresh_from_db()
    assert request.state == RequestState.SUCCEEDED
    assert request.picked_up_at and request.finished_at and request.run is not None
    assert request.run.request_id == request.pk
    _, obj = annotation(kapi, key)
    assert obj["status"]["lastHandledReconcileAt"] == request.token


def test_each_request_gets_a_fresh_token(key):
    first = reconcile_request_create(key, actor="user:alice")
    second = reconcile_request_create(key, actor="user:alice")
    assert first.token != second.token and first.pk != second.pk


def test_the_same_idempotency_key_returns_the_first_request(key, kapi, namespace, workqueue):
    first = reconcile_request_create(key, actor="user:alice", idempotency_key="k1")
    again = reconcile_request_create(key, actor="user:alice", idempotency_key="k1")
    assert again.pk == first.pk and ReconcileRequest.objects.count() == 1
    assert workqueue.sent.keys == [key]
    kube.create_object(kapi, GADGET, gadget(namespace, "other"))
    with pytest.raises(IdempotencyConflict):
        reconcile_request_create(GADGET.request(namespace, "other").key(), actor="user:alice", idempotency_key="k1")
    # another actor may use the same idempotency key
    assert reconcile_request_create(key, actor="user:bob", idempotency_key="k1").pk != first.pk


def test_a_missing_object_an_unknown_kind_or_a_bad_actor_is_refused(key, namespace):
    with pytest.raises(ObjectNotFound):
        reconcile_request_create(GADGET.request(namespace, "nope").key(), actor="user:alice")
    with pytest.raises(ReconcileRequestError):
        reconcile_request_create("x.io/v1/things/ns/n", actor="user:alice")
    with pytest.raises(ReconcileRequestError):
        reconcile_request_create(key, actor="controller")
    assert ReconcileRequest.objects.count() == 0


def test_inside_a_transaction_the_annotation_and_the_enqueue_wait_for_the_commit(key, kapi, workqueue):
    with transaction.atomic():
        request = reconcile_request_create(key, actor="user:alice")
        assert annotation(kapi, key)[0] is None and workqueue.sent.keys == []
    assert annotation(kapi, key)[0] == request.token and workqueue.sent.keys == [key]
