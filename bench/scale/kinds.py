"""What the benchmark creates: a kind's API resource, its CRD, one object of it and the reconciler that runs it.

`memcached` (the default): the product's Memcached at `spec.size` 1, which owns a Deployment (kubesim makes its
ReplicaSet and Pod), so the controller's caches hold four objects per managed one. `gadget`: the test suite's
childless Gadget (tests/reconcilers/testkinds.py) in its `ok` mode: one object per managed one, for N beyond what
kubesim holds in memory with children (note that each Gadget reconcile appends two marks to a Redis list, which
the Redis figure then includes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from bench.converge.procs import ROOT
from reconcilers.core.reconciler import ResourceKind
from reconcilers.kinds.memcached import MEMCACHED
from tests.reconcilers.testkinds import GADGET, kind_crd


@dataclass(frozen=True)
class BenchKind:
    """One kind the benchmark can create."""

    name: str
    resource: ResourceKind
    reconciler: str  # the dotted path for OPSCONSOLE_RECONCILERS
    children: bool

    def crd(self) -> dict[str, Any]:
        """The CustomResourceDefinition to apply before creating objects."""
        if self.name == "memcached":
            crd: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / "crds" / "memcached.yaml").read_text())
            return crd
        return kind_crd(self.resource)

    def manifest(self, namespace: str, name: str) -> dict[str, Any]:
        """One object of the kind."""
        spec: dict[str, Any] = {"size": 1} if self.name == "memcached" else {"mode": "ok"}
        return {"apiVersion": f"{self.resource.group}/{self.resource.version}", "kind": self.resource.kind,
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}

    def key(self, namespace: str, name: str) -> str:
        """The object's workqueue key (the engine's `group/version/plural/namespace/name`)."""
        return self.resource.request(namespace, name).key()


KINDS = {
    "memcached": BenchKind("memcached", MEMCACHED, "reconcilers.kinds.memcached.MemcachedReconciler", True),
    "gadget": BenchKind("gadget", GADGET, "tests.reconcilers.testkinds.GadgetReconciler", False),
}
