"""`manage.py reconcile <kind> <namespace>/<name> --reason … [--wait]` in this process: the request goes
through the service, and --wait follows it to the end (a thread stands in for the worker)."""

from __future__ import annotations

import threading

import pytest
from django.core.management import CommandError, call_command

from reconcilers.engine import dispatch, kube, runner
from reconcilers.models import ReconcileRequest, RequestState
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def gadget_ns(kapi, namespace, workqueue, reconcilers):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    kube.create_object(kapi, GADGET, gadget(namespace, "g", mode="ok"))
    return namespace


@pytest.fixture
def worker_thread(monkeypatch):
    """Dispatching runs the reconcile in a thread, as a worker would."""
    threads = []

    def dispatch_to_thread(keys):
        keys = list(keys)
        for key in keys:
            t = threading.Thread(target=runner.run, args=(key,))
            t.start()
            threads.append(t)
        return len(keys)

    monkeypatch.setattr(dispatch, "dispatch", dispatch_to_thread)
    yield
    for t in threads:
        t.join(10)


def test_without_wait_it_makes_the_request_and_says_so(gadget_ns, capsys):
    call_command("reconcile", "Gadget", f"{gadget_ns}/g", "--reason", "because", "--actor", "user:alice")
    out = capsys.readouterr().out
    request = ReconcileRequest.objects.get()
    assert (request.actor, request.reason) == ("user:alice", "because")
    assert str(request.pk) in out and request.token in out


def test_with_wait_it_follows_the_request_until_it_succeeded(gadget_ns, worker_thread, capsys, kapi):
    call_command("reconcile", "gadgets", f"{gadget_ns}/g", "--reason", "check", "--wait", "--timeout", "20",
                 "--interval", "0.05")
    out = capsys.readouterr().out
    request = ReconcileRequest.objects.get()
    assert request.state == RequestState.SUCCEEDED
    lines = [line.split()[0] for line in out.splitlines()]
    assert lines[0] == "requested" and "succeeded" in lines and "status" in lines
    assert f"lastHandledReconcileAt {request.token}" in out
    live = kube.get_object(kapi, GADGET, gadget_ns, "g")
    assert live["status"]["lastHandledReconcileAt"] == request.token


def test_a_failed_request_exits_with_an_error(gadget_ns, worker_thread, kapi):
    kube.patch_object(kapi, GADGET, gadget_ns, "g", {"spec": {"mode": "crash"}})
    with pytest.raises(CommandError, match="failed"):
        call_command("reconcile", "Gadget", f"{gadget_ns}/g", "--wait", "--timeout", "20", "--interval", "0.05")
    assert ReconcileRequest.objects.get().state == RequestState.FAILED


@pytest.mark.parametrize("args, message", [
    (["Nothing", "ns/x"], "no reconciler"),
    (["Gadget", "x"], "namespaced"),
    (["Gadget", "ns/missing"], "not found"),
])
def test_bad_arguments_are_refused(gadget_ns, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("reconcile", *args)
