"""Test kinds for the controller tests: a namespaced Widget that owns Deployments, and a Gadget the
runcontroller test bootstraps from its own CRD. Their reconcile is never called by these tests."""

from __future__ import annotations

from typing import Any

from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result
from tests.reconcilers.testkinds import kind_crd

WIDGET = ResourceKind("widgets.test.opsconsole.io", "v1", "widgets", "Widget")
GADGET = ResourceKind("gadgets.test.opsconsole.io", "v1", "gadgets", "Gadget")
DEPLOYMENT = ResourceKind("apps", "v1", "deployments", "Deployment")
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
CONFIGMAP = ResourceKind("", "v1", "configmaps", "ConfigMap")

MACHINE = StateMachine.build("test", states=["Pending", "Running"], initial="Pending",
                             transitions={"Pending": ["Running"]})


class WidgetReconciler(Reconciler):
    resource = WIDGET
    state_machine = MACHINE
    owns = (DEPLOYMENT,)

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        return Result()


class GadgetReconciler(Reconciler):
    resource = GADGET
    state_machine = MACHINE

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        return Result()


crd = kind_crd  # the controller tests' name for it


def widget(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": WIDGET.api_version, "kind": WIDGET.kind,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"size": 1, **spec}}
