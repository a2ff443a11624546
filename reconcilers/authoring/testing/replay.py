"""`replay_run(...)`, the pytest plugin's replay of recorded runs: the regression test a team runs before shipping a
new version of its kind. A recorded run's kept inputs (exported with `manage.py replay RUN_ID --export run.json`,
or a run id when the test process has the engine's database) are replayed offline with the code under test, on a
kubesim of their own, and compared with the outcome the run recorded (`reconcilers.services.replay`):

    def test_yesterdays_failure_still_fails_the_same_way(replay_run):
        report = replay_run("tests/runs/run-4711.json")
        assert report.same, report.differences

The kind is the one of `opsconsole_kinds` whose resource the run's key names (or pass `kind=`). A run that cannot be
replayed raises `ReplayRefused` saying why (its inputs gone, a kind version no longer served: the one it needs).
No Django unless a run id is given.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from reconcilers.core.reconciler import Reconciler
    from reconcilers.services.replay import ReplayReport

ReplayRun = Callable[..., "ReplayReport"]


def replay(source: int | str | os.PathLike[str] | dict[str, Any], kinds: list[type[Reconciler]],
           kind: type[Reconciler] | Reconciler | None = None) -> ReplayReport:
    """Replay `source` (a run id, a path to exported inputs, or the inputs) with `kind` or the matching one of
    `kinds`."""
    from reconcilers.core.types import Request
    from reconcilers.services.replay import ReplayRefused, replay_inputs, run_replay

    rec = kind() if isinstance(kind, type) else kind
    if isinstance(source, int):
        return run_replay(source, rec)
    if isinstance(source, dict):
        inputs = source
    else:
        with open(source, encoding="utf-8") as f:
            inputs = json.load(f)
    if rec is None:
        wanted = Request.from_key(str(inputs.get("key") or ""))
        found = [k for k in kinds if (k.resource.group, k.resource.plural) == (wanted.group, wanted.plural)]
        if not found:
            raise ReplayRefused("unknown_kind", f"none of the kinds under test reconciles {wanted.group}/"
                                                f"{wanted.plural} (the run's {inputs.get('key')}): pass kind=")
        rec = found[0]()
    return replay_inputs(inputs, rec)


@pytest.fixture
def replay_run(opsconsole_kinds: list[type[Reconciler]]) -> ReplayRun:
    """`replay_run(run_id | path | inputs, kind=None) -> ReplayReport` (see the module docstring)."""

    def run(source: Any, kind: Any = None) -> ReplayReport:
        return replay(source, opsconsole_kinds, kind)

    return run
