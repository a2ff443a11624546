"""Testing a kind, under its public name: `opsconsole.testing` is `reconcilers.authoring.testing` (the pytest plugin
and `FakeContext`; see there). Kind authors write

    from opsconsole.testing import FakeContext

and the `pytest11` entry point `opsconsole` names `opsconsole.testing.plugin`. The submodules here re-export
theirs; nothing is imported until a name is used, so loading the plugin stays cheap.
"""

from __future__ import annotations

from typing import Any

from reconcilers.authoring import testing as _testing

__all__ = list(_testing.__all__)


def __getattr__(name: str) -> Any:
    """The public names of `reconcilers.authoring.testing`, imported on first use."""
    return getattr(_testing, name)
