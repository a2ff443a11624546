"""Escalation on the detail page's Healing panel: what it shows of an anomaly that needs a person (who acknowledged
it, who it is assigned to) and of each record's notifications (`escalation_context`), and its forms: acknowledge
(an optional note), assign (to an operator who can see the resource), resolve (a note required). Each form is a
thin view like the other healing forms: the role and namespace checks and the action record of
`opsconsole.console.access.audited_action`, then one call of `reconcilers.services.escalation`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from opsconsole.accounts.assignees import assignee_refusal
from opsconsole.accounts.roles import ADMIN, OPERATOR, namespace_allowed
from opsconsole.console.access import Refused, resource_for_action
from opsconsole.console.security import console_action
from opsconsole.console.views.answer import healing_answer
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import escalation

ASSIGNEES_SHOWN = 100


def escalation_context(resource: Resource, records: list[HealingRecord]) -> dict[str, Any]:
    """The anomalies that need a person, the users one may assign them to, and each record's deliveries
    (`record.deliveries_shown`)."""
    deliveries = escalation.record_deliveries(records)
    for record in records:
        record.deliveries_shown = deliveries.get(record.pk, [])
    needing = escalation.rules_needing_person(resource)
    assignees: list[str] = []
    if needing:
        users = (get_user_model().objects.filter(is_active=True)
                 .filter(Q(is_superuser=True) | Q(groups__name__in=[OPERATOR, ADMIN])).distinct()
                 .order_by("username")[:ASSIGNEES_SHOWN])
        assignees = [u.get_username() for u in users if namespace_allowed(u, resource.namespace, resource.cluster)]
    return {"needs_person": needing, "assignees": assignees}


def _step(request: HttpRequest, pk: int, rule: str, step: str) -> HttpResponse:
    note = request.POST.get("note", "").strip()
    assignee = request.POST.get("assignee", "").strip()
    obj = resource_for_action(request, pk)
    actor = f"user:{request.user.get_username()}"

    def do(detail: dict[str, Any]) -> HealingRecord:
        detail.update({"rule": rule, "note": note[:1000]} | ({"assignee": assignee} if step == "assign" else {}))
        if obj is None:
            raise Refused(404, "No such resource, or it is outside your namespaces.")
        if step == "assign" and (why := assignee_refusal(assignee, obj.namespace)) is not None:
            raise Refused(400, f"assignee: {why}")
        try:
            record = escalation.anomaly_step(step, obj, rule, actor=actor, note=note, assignee=assignee)
        except escalation.HealingRefused as exc:
            raise Refused(exc.status, f"{exc.field}: {exc.message}") from exc
        detail.update({"healing_record": record.seq, "healing_action": record.action})
        return record

    return healing_answer(request, pk, obj, action=f"anomaly.{step}", reason=note, do=do)


@console_action
@require_POST
def anomaly_acknowledge(request: HttpRequest, pk: int, rule: str) -> HttpResponse:
    """Acknowledge an anomaly that needs a person."""
    return _step(request, pk, rule, "acknowledge")


@console_action
@require_POST
def anomaly_assign(request: HttpRequest, pk: int, rule: str) -> HttpResponse:
    """Assign an anomaly that needs a person to an operator."""
    return _step(request, pk, rule, "assign")


@console_action
@require_POST
def anomaly_resolve(request: HttpRequest, pk: int, rule: str) -> HttpResponse:
    """Resolve an anomaly that needs a person (a note is required)."""
    return _step(request, pk, rule, "resolve")
