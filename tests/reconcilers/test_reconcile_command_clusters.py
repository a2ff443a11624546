"""Issue 41: `manage.py reconcile --cluster NAME` (or an object's six-part key alone) asks the reconcile of that
cluster's object, through that cluster's client (the session kubesim registered as cluster `prod` with its
kubeconfig context); a cluster this process cannot reach is refused before anything is written."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from reconcilers.core.meta import RECONCILE_REQUESTED_AT
from reconcilers.engine import kube
from reconcilers.models import ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
LOCAL = f"{GADGET.group}/{GADGET.version}/{GADGET.plural}"


@pytest.fixture
def gadget_ns(kapi, namespace, workqueue, reconcilers):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    kube.create_object(kapi, GADGET, gadget(namespace, "g", mode="ok"))
    return namespace


def annotation(kapi, namespace: str) -> str | None:
    obj = kube.get_object(kapi, GADGET, namespace, "g")
    return (obj["metadata"].get("annotations") or {}).get(RECONCILE_REQUESTED_AT)


def test_cluster_flag_and_a_six_part_key_reach_that_cluster(gadget_ns, kapi, capsys):
    f.cluster("prod", context="kubesim")  # the session's kubesim, reached through its kubeconfig context
    call_command("reconcile", "Gadget", f"{gadget_ns}/g", "--cluster", "prod", "--actor", "user:alice")
    request = ReconcileRequest.objects.get()
    assert (request.cluster, request.key) == ("prod", f"prod/{LOCAL}/{gadget_ns}/g")
    assert annotation(kapi, gadget_ns) == request.token
    assert "in cluster prod" in capsys.readouterr().out
    call_command("reconcile", f"prod/{LOCAL}/{gadget_ns}/g", "--actor", "user:alice", "--idempotency-key", "k2")
    second = ReconcileRequest.objects.exclude(pk=request.pk).get()
    assert (second.cluster, second.key) == ("prod", request.key)
    assert annotation(kapi, gadget_ns) == second.token


def test_a_cluster_that_cannot_be_reached_or_a_bad_argument_is_refused_and_nothing_is_written(gadget_ns, kapi):
    f.cluster("far", context="no-such-context")
    for args, said in [(["Gadget", f"{gadget_ns}/g", "--cluster", "far"], "far"),
                       (["Gadget", f"{gadget_ns}/g", "--cluster", "nowhere"], "nowhere"),
                       (["Gadget", f"{gadget_ns}/g", "--cluster", "Bad_Name"], "--cluster"),
                       ([f"far/{LOCAL}/{gadget_ns}/g", "--cluster", "prod"], "the key names cluster far"),
                       (["not/a/key"], "object's key")]:
        with pytest.raises(CommandError, match=said):
            call_command("reconcile", *args, "--actor", "user:alice")
    assert not ReconcileRequest.objects.exists() and annotation(kapi, gadget_ns) is None
