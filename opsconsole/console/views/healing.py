"""Self-healing on the detail page: what the Healing panel shows (`healing_context`) and its forms (roll back to a
generation, suspend with a reason and a duration, resume, pin / unpin a generation). Each form is a thin view:
the role and namespace checks and the action record of `opsconsole.console.access.audited_action` (like "Reconcile
now"), then one call of `reconcilers.services.healing`; a refusal shows its message and is recorded."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_POST

from opsconsole.console.access import Refused, resource_for_action
from opsconsole.console.security import console_action
from opsconsole.console.views.answer import healing_answer
from opsconsole.console.views.escalation import escalation_context
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import healing
from reconcilers.services.revisions import resource_revisions

#: the Suspend form's durations: (value in seconds, label); "" suspends until resumed
SUSPEND_DURATIONS: list[tuple[str, str]] = [
    ("900", "15 minutes"), ("3600", "1 hour"), ("14400", "4 hours"), ("86400", "24 hours"), ("", "until resumed"),
]
RECORDS_SHOWN = 50


def healing_context(resource: Resource) -> dict[str, Any]:
    """What the Healing panel and the revisions' "Roll back to this" need."""
    earlier = [g for g in resource_revisions(resource).values_list("generation", flat=True)[:100]
               if g < resource.generation]
    records = healing.resource_healing_records(resource, limit=RECORDS_SHOWN)
    return {"healing": healing.resource_healing(resource), "healing_records": records,
            "rollback_generations": earlier, "suspend_durations": SUSPEND_DURATIONS,
            **escalation_context(resource, records)}


def _generation(request: HttpRequest) -> int:
    try:
        value = int(request.POST.get("generation", ""))
    except ValueError:
        raise Refused(400, "generation: give a generation number.") from None
    if value < 1 or value > 2**62:
        raise Refused(400, "generation: give a generation number.")
    return value


def _run(request: HttpRequest, pk: int, action: str, call: Callable[[Resource, str, str], HealingRecord]
         ) -> HttpResponse:
    """Check, record and run one healing action on resource `pk` (see the module docstring)."""
    reason = request.POST.get("reason", "").strip()[:1000]
    obj = resource_for_action(request, pk)
    actor = f"user:{request.user.get_username()}"

    def do(detail: dict[str, Any]) -> HealingRecord:
        if obj is None:
            raise Refused(404, "No such resource, or it is outside your namespaces.")
        if not reason:
            raise Refused(400, "reason: give a reason; it is recorded with the action.")
        if "\x00" in reason:
            raise Refused(400, "reason: the reason must not contain NUL characters.")
        try:
            record = call(obj, actor, reason)
        except healing.HealingRefused as exc:
            raise Refused(exc.status, f"{exc.field}: {exc.message}") from exc
        except Refused:
            raise
        except Exception as exc:  # the Kubernetes API did not answer
            raise Refused(503, f"{type(exc).__name__}: {exc}") from exc
        detail.update({"healing_record": record.seq, "healing_action": record.action})
        return record

    return healing_answer(request, pk, obj, action=action, reason=reason, do=do)


@console_action
@require_POST
def resource_rollback(request: HttpRequest, pk: int) -> HttpResponse:
    """Roll back to an earlier generation's spec."""
    return _run(request, pk, "resource.rollback", lambda r, actor, reason: healing.resource_rollback(
        r, _generation(request), actor=actor, reason=reason))


@console_action
@require_POST
def resource_suspend(request: HttpRequest, pk: int) -> HttpResponse:
    """Suspend reconciles for a duration, or until resumed."""
    def call(r: Resource, actor: str, reason: str) -> HealingRecord:
        seconds = request.POST.get("duration", "")
        allowed = {value for value, _ in SUSPEND_DURATIONS}
        if seconds not in allowed:
            raise Refused(400, "duration: pick one of the offered durations.")
        until = timezone.now() + timedelta(seconds=int(seconds)) if seconds else None
        return healing.resource_suspend(r, actor=actor, reason=reason, until=until)

    return _run(request, pk, "resource.suspend", call)


@console_action
@require_POST
def resource_resume(request: HttpRequest, pk: int) -> HttpResponse:
    """Resume reconciles."""
    return _run(request, pk, "resource.resume",
                lambda r, actor, reason: healing.resource_resume(r, actor=actor, reason=reason))


@console_action
@require_POST
def resource_pin(request: HttpRequest, pk: int) -> HttpResponse:
    """Pin a generation: automatic rollback never restores an older one."""
    return _run(request, pk, "resource.pin", lambda r, actor, reason: healing.resource_pin(
        r, _generation(request), actor=actor, reason=reason))


@console_action
@require_POST
def resource_unpin(request: HttpRequest, pk: int) -> HttpResponse:
    """Remove the pin."""
    return _run(request, pk, "resource.unpin",
                lambda r, actor, reason: healing.resource_unpin(r, actor=actor, reason=reason))
