"""`RunCapture`: what a kept run leaves for later, beside its `ReconcileRun` row: the inputs its step read (for a
replay, `reconcilers.engine.capture`), compressed and bounded, and the log lines of a run someone turned verbose
(`reconcilers.engine.verbosity`), bounded. Only kept runs have one (errors, slow, manual, sampled); a capture whose
inputs passed their retention keeps its row with the inputs gone (`inputs_gone_at`), so a replay says "gone", never
"empty".

The run is referenced by id without a database constraint: retention deletes old runs with one SQL statement
(`reconcilers.engine.retention`), which a constraint would stop; a capture whose run is gone is unreachable."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class RunCapture(models.Model):
    """The kept inputs and the verbose log lines of one run."""

    run = models.OneToOneField("reconcilers.ReconcileRun", on_delete=models.DO_NOTHING, db_constraint=False,
                               primary_key=True, related_name="capture")
    created_at = models.DateTimeField(default=timezone.now)
    kind_version = models.CharField(max_length=128, blank=True,
                                    help_text="the kind's API version the object was read in (group/version)")
    operator_version = models.CharField(max_length=128, blank=True, help_text="the operator version of the run")
    inputs = models.BinaryField(null=True, blank=True, help_text="zlib-compressed JSON; null when none were kept "
                                                                 "or they are gone")
    inputs_bytes = models.PositiveIntegerField(default=0, help_text="the inputs' JSON size before compression")
    inputs_truncated = models.BooleanField(default=False, help_text="over the bound: only the object was kept")
    inputs_gone_at = models.DateTimeField(null=True, blank=True, help_text="when retention dropped the inputs")
    log_level = models.CharField(max_length=16, blank=True, help_text="the verbosity the run was logged at")
    log_lines = models.JSONField(default=list, blank=True, help_text="the run's log lines at that level, bounded")
    log_lines_dropped = models.PositiveIntegerField(default=0, help_text="lines beyond the bound: counted")

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="runcapture_created")]

    def __str__(self) -> str:
        return f"capture of run {self.run_id}"
