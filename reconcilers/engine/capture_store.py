"""Where a kept run's capture is stored and found (`RunCapture`): `capture_keep` writes one (best effort: a capture
never fails a run), `capture_inputs` reads one back and says plainly when there is none (the run was not kept) or
it is gone (retention dropped it), `captures_expire` drops the inputs older than their retention (the row stays,
marked gone, with its log lines), `capture_lines` the verbose log lines kept with a run, `verbose_run_ids` which
runs of a page were verbose.

The retention of inputs is `OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS` (default 14), applied by `manage.py retention`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from reconcilers.engine.capture import Packed, unpack
from reconcilers.models import ReconcileRun, RunCapture

log = logging.getLogger(__name__)

DEFAULT_RETENTION_DAYS = 14.0


class CaptureMissing(LookupError):
    """A run's inputs cannot be had: `why` is `no_run`, `not_kept` or `gone` (with `gone_at`)."""

    def __init__(self, why: str, message: str, gone_at: datetime | None = None) -> None:
        super().__init__(message)
        self.why, self.gone_at = why, gone_at


@dataclass
class KeptInputs:
    """One run's inputs as kept, and its record."""

    run: ReconcileRun
    inputs: dict[str, Any]
    size: int
    truncated: bool


def retention_days() -> float:
    """How long inputs are kept (days)."""
    return float(getattr(settings, "OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS", DEFAULT_RETENTION_DAYS))


def capture_keep(run_id: int, *, packed: Packed | None = None, kind_version: str = "", operator_version: str = "",
                 log_level: str = "", log_lines: list[str] | None = None, log_lines_dropped: int = 0) -> bool:
    """Store a run's capture (its inputs and/or its log lines); False when it could not be stored (logged)."""
    try:
        RunCapture.objects.create(
            run_id=run_id, kind_version=kind_version[:128], operator_version=operator_version[:128],
            inputs=packed.data if packed is not None else None, inputs_bytes=packed.size if packed else 0,
            inputs_truncated=bool(packed and packed.truncated), log_level=log_level[:16],
            log_lines=list(log_lines or []), log_lines_dropped=log_lines_dropped)
    except Exception:  # noqa: BLE001 - the run is recorded; its capture is a courtesy
        log.warning("could not keep the capture of run %s", run_id, exc_info=True)
        return False
    return True


def capture_inputs(run_id: int) -> KeptInputs:
    """The kept inputs of run `run_id`; CaptureMissing saying why there are none."""
    run = ReconcileRun.objects.filter(pk=run_id).first()
    if run is None:
        raise CaptureMissing("no_run", f"there is no run {run_id} on record (retention may have deleted it)")
    row = RunCapture.objects.filter(run_id=run_id).first()
    if row is None or (row.inputs is None and row.inputs_gone_at is None):
        raise CaptureMissing("not_kept", f"run {run_id} kept no inputs: only kept runs do (errors, slow, manual, "
                                         f"sampled), and only since inputs are kept")
    if row.inputs is None:
        raise CaptureMissing("gone", f"the inputs of run {run_id} are gone: retention dropped them on "
                                     f"{row.inputs_gone_at:%Y-%m-%d %H:%M:%S} UTC (kept {retention_days():g} days)",
                             gone_at=row.inputs_gone_at)
    return KeptInputs(run, unpack(row.inputs), row.inputs_bytes, row.inputs_truncated)


def capture_lines(run_id: int) -> tuple[str, list[str], int] | None:
    """(level, lines, dropped) of a run logged verbosely, or None."""
    row = RunCapture.objects.filter(run_id=run_id).only("log_level", "log_lines", "log_lines_dropped").first()
    if row is None or not row.log_level:
        return None
    return row.log_level, list(row.log_lines or []), row.log_lines_dropped


def verbose_run_ids(run_ids: list[int]) -> set[int]:
    """Which of these runs were verbose runs (kept log lines): one query."""
    if not run_ids:
        return set()
    return set(RunCapture.objects.filter(run_id__in=run_ids).exclude(log_level="").values_list("run_id", flat=True))


def captures_expire(*, days: float | None = None, now: datetime | None = None, dry_run: bool = False) -> int:
    """Drop the inputs kept longer than `days` (default `retention_days()`): the rows stay, marked gone. The count."""
    before = (now or timezone.now()) - timezone.timedelta(days=retention_days() if days is None else days)
    old = RunCapture.objects.filter(created_at__lt=before, inputs__isnull=False)
    if dry_run:
        return old.count()
    return old.update(inputs=None, inputs_gone_at=now or timezone.now())
