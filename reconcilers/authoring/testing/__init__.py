"""Testing a kind: the pytest plugin (`plugin`, loaded through the `pytest11` entry point of the installed
opsconsole distribution, which names its public alias `opsconsole.testing.plugin`) and `FakeContext` for unit
tests of `reconcile()` without a cluster. Kind authors import it as `opsconsole.testing`:

    from opsconsole.testing import FakeContext

    def test_website_gets_a_deployment(reconcile_once):       # a plugin fixture: no conftest.py needed
        outcome = reconcile_once(website("web", replicas=2))
        assert outcome.phase == "Pending"

Importing this package (or using any fixture but `opsconsole_engine`) needs no Django settings. The names below
are imported on first use, so loading the plugin stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconcilers.authoring.testing.cluster import POD_DELAYS, TIMINGS
    from reconcilers.authoring.testing.engine import Engine
    from reconcilers.authoring.testing.fake import FakeContext
    from reconcilers.authoring.testing.faults import KubesimFaults
    from reconcilers.authoring.testing.kinds import KindNotFound
    from reconcilers.authoring.testing.reconcile import Reconciling
    from reconcilers.authoring.testing.specs import SpecRejected

__all__ = ["POD_DELAYS", "TIMINGS", "Engine", "FakeContext", "KindNotFound", "KubesimFaults", "Reconciling",
           "SpecRejected"]

_WHERE = {
    "FakeContext": "reconcilers.authoring.testing.fake",
    "Engine": "reconcilers.authoring.testing.engine",
    "KindNotFound": "reconcilers.authoring.testing.kinds",
    "Reconciling": "reconcilers.authoring.testing.reconcile",
    "SpecRejected": "reconcilers.authoring.testing.specs",
    "KubesimFaults": "reconcilers.authoring.testing.faults",
    "POD_DELAYS": "reconcilers.authoring.testing.cluster",
    "TIMINGS": "reconcilers.authoring.testing.cluster",
}


def __getattr__(name: str) -> Any:
    """The public names, imported on first use."""
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
