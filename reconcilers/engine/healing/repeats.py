"""No fights: a spec the engine rolled back, applied again (a GitOps tool's self-heal, a script in a loop), is not
rolled back again and again.

A re-apply is a generation whose spec (its `SpecRevision`, by canonical digest) is the spec of a generation a
rollback replaced (`rollback.applied` records within `REPEAT_WINDOW_SECONDS`, their `from_digest`). The n-th
repeat (n earlier rollbacks of that spec):
- below `ESCALATE_AT_REPEAT`: deferred — `rollback.deferred` (until when: `backoff_seconds() * 2 ** (n - 1)` from
  now) and the rollback state `deferred`: a fix applied meanwhile (a new generation) supersedes it; still due when
  the back-off has passed, it is escalated, not rolled back again (the re-applier would only apply it again: one
  automatic rollback per bad spec, then a person);
- from `ESCALATE_AT_REPEAT` on: no rollback — the caller escalates (`rollback.refused`) with the repeat count and
  who re-applied it (the revision's actor: `kube:<user>` when the webhook server admitted the write, else the
  field manager's claim `manager:<name>`).

`OPSCONSOLE_ROLLBACK_BACKOFF_SECONDS` (a setting; default 300) is the first back-off.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from reconcilers.engine.healing.due import revision_spec, spec_digest
from reconcilers.engine.healing.records import fields_to_save, healing_append
from reconcilers.engine.healing.state import DEFERRED, IN_PROGRESS, WRITING
from reconcilers.models import HealingAction, HealingRecord, Resource, SpecRevision

#: the repeat that escalates to a person instead of being deferred
ESCALATE_AT_REPEAT = 2
#: how long a rolled-back spec is remembered (a re-apply after that is a new change, not a fight)
REPEAT_WINDOW_SECONDS = 24 * 3600.0
DEFAULT_BACKOFF_SECONDS = 300.0


def backoff_seconds() -> float:
    """The first repeat's back-off: settings.OPSCONSOLE_ROLLBACK_BACKOFF_SECONDS (default 300)."""
    value = getattr(settings, "OPSCONSOLE_ROLLBACK_BACKOFF_SECONDS", DEFAULT_BACKOFF_SECONDS)
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return DEFAULT_BACKOFF_SECONDS


@dataclass(frozen=True)
class Repeat:
    """The current generation re-applies a spec rolled back `count` times (the generations it was rolled back
    from: `earlier`); `reapplier` is the revision's actor."""

    count: int
    digest: str
    reapplier: str
    earlier: tuple[int, ...]

    @property
    def escalates(self) -> bool:
        """Whether this repeat goes to a person instead of being deferred."""
        return self.count >= ESCALATE_AT_REPEAT

    def backoff(self) -> float:
        """This repeat's back-off, doubling per repeat."""
        return backoff_seconds() * 2 ** max(0, self.count - 1)

    def describe(self, generation: int) -> str:
        """The repeat in words, naming the count and the re-applier."""
        times = "once" if self.count == 1 else f"{self.count} times"
        return (f"generation {generation} re-applies the spec already rolled back {times} (from generation"
                f"{'s' if len(self.earlier) > 1 else ''} {', '.join(str(g) for g in self.earlier)}): repeat "
                f"{self.count}, re-applied by {self.reapplier}")


def repeat_of(resource: Resource, now: datetime) -> Repeat | None:
    """The repeat the current generation is (see the module docstring), or None when it is no re-apply."""
    spec = revision_spec(resource, resource.generation)
    if spec is None:
        return None
    digest = spec_digest(spec)
    earlier = list(HealingRecord.objects.filter(
        resource_id=resource.id, action=HealingAction.ROLLBACK_APPLIED, detail__from_digest=digest,
        created_at__gte=now - timedelta(seconds=REPEAT_WINDOW_SECONDS)).order_by("seq")
        .values_list("detail", flat=True))
    if not earlier:
        return None
    actor = (SpecRevision.objects.filter(resource_uid=resource.uid, generation=resource.generation)
             .values_list("actor", flat=True).first()) or "unknown"
    generations = tuple(int(d.get("from_generation") or 0) for d in earlier if isinstance(d, dict))
    return Repeat(len(earlier), digest, actor, generations)


def deferred_until(resource: Resource) -> datetime | None:
    """When the deferral of the current generation ends (None: it is not deferred)."""
    rollback = resource.rollback or {}
    if rollback.get("state") != DEFERRED or rollback.get("generation") != resource.generation:
        return None
    try:
        return datetime.fromisoformat(str(rollback.get("until")))
    except ValueError:
        return None


def defer(resource_id: int, generation: int, repeat: Repeat, why: str, now: datetime) -> HealingRecord | None:
    """Record `rollback.deferred` for the current generation (its own transaction, the row locked) and set the
    rollback state `deferred` until the back-off ends; None when the row moved on meanwhile."""
    until = now + timedelta(seconds=repeat.backoff())
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=resource_id)
        if row.generation != generation or (row.rollback or {}).get("state") in (WRITING, IN_PROGRESS):
            return None
        message = (f"{repeat.describe(generation)}; not rolled back before {until.isoformat()} "
                   f"(back-off {repeat.backoff():g}s)")
        detail: dict[str, Any] = {"repeat": repeat.count, "until": until.isoformat(), "digest": repeat.digest,
                                  "reapplier": repeat.reapplier, "earlier": list(repeat.earlier),
                                  "backoff_seconds": repeat.backoff()}
        record = healing_append(row, HealingAction.ROLLBACK_DEFERRED, actor="controller", reason=why,
                                message=message, at=now, detail=detail)
        row.rollback = {"state": DEFERRED, "generation": generation, "until": until.isoformat(),
                        "repeat": repeat.count, "reapplier": repeat.reapplier, "digest": repeat.digest,
                        "deferred_at": now.isoformat(), "reason": why, "record": record.seq}
        row.save(update_fields=fields_to_save("rollback"))
    return record
