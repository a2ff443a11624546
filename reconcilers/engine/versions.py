"""Which version of the operator executed a run: recorded on every `ReconcileRun`, so that a new version (a canary,
or a rolling upgrade of the workers) is judged on its own runs' evidence.

`OPSCONSOLE_OPERATOR_VERSION` names it when set (what the deployment knows: the image tag, a git revision); else it
is the Python distribution that provides the kind's code and its version (`opsconsole 0.1.0` for the built-in
kinds, `acme-kinds 2.3.1` for a kind installed from its own package), and, for code no distribution provides (a
kind imported from a path), the kind's module.
"""

from __future__ import annotations

import functools
from importlib import metadata

from django.conf import settings

from reconcilers.core.reconciler import Reconciler

#: the column's length (ReconcileRun.operator_version)
MAX_LENGTH = 128


def operator_version(reconciler: Reconciler) -> str:
    """The version that runs `reconciler`'s kind in this process (see the module)."""
    configured = str(getattr(settings, "OPSCONSOLE_OPERATOR_VERSION", "") or "").strip()
    if configured:
        return configured[:MAX_LENGTH]
    return _of_module(type(reconciler).__module__)


@functools.cache
def _of_module(module: str) -> str:
    top = module.split(".", 1)[0]
    for dist in metadata.packages_distributions().get(top, []):
        try:
            return f"{dist} {metadata.version(dist)}"[:MAX_LENGTH]
        except metadata.PackageNotFoundError:
            continue
    return f"module {module}"[:MAX_LENGTH]
