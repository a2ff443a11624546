"""The audit log: every transition (filter by kind, namespace, actor, phase, time; narrowed to the clusters the
navigation's picker chose; CSV / JSON-lines export through the API's export endpoints) and, for admins as in the
API, every action asked (allowed or refused); and the hash chain's verification status."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST

from opsconsole.accounts.action_records import action_record_list
from opsconsole.accounts.roles import ADMIN, user_has_role, user_namespaces
from opsconsole.accounts.targets import target_example
from opsconsole.console.access import Refused, audited_action
from opsconsole.console.clusters import cluster_choice
from opsconsole.console.live import page
from opsconsole.console.paging import keyset_page
from opsconsole.console.security import console_action, console_page
from reconcilers.services.audit_status import ChainStatus, audit_chain_status, audit_verify_interval, audit_verify_wait
from reconcilers.services.selectors import transitions
from reconcilers.services.selectors.filters import InvalidFilter

FRAGMENTS = {"rows": "console/_audit_rows.html"}
T_KEYS = ("kind", "namespace", "name", "actor", "from_phase", "to_phase", "after", "before")
A_KEYS = ("actor", "action", "outcome", "target", "after", "before")


def _when(raw: str, field: str, errors: list[str]) -> datetime | None:
    if not raw:
        return None
    value = parse_datetime(raw)
    if value is None:
        errors.append(f"{field}: not a date and time (YYYY-MM-DDTHH:MM)")
        return None
    return timezone.make_aware(value) if timezone.is_naive(value) else value


@console_page
def audit_log(request: HttpRequest) -> HttpResponse:
    """Transitions (default) or actions (`?view=actions`, admins)."""
    g = request.GET
    view = "actions" if g.get("view") == "actions" else "transitions"
    is_admin = user_has_role(request.user, ADMIN)
    errors: list[str] = []
    after, before = _when(g.get("after", ""), "after", errors), _when(g.get("before", ""), "before", errors)
    keys = A_KEYS if view == "actions" else T_KEYS
    kept = {k: g[k] for k in keys if g.get(k)}
    choice = cluster_choice(request)  # the picker narrows the transitions (not the actions: they are global)
    if view == "transitions":
        errors.extend(choice.errors)
    chain = audit_chain_status(namespaces=user_namespaces(request.user))
    context: dict[str, Any] = {"view": view, "is_admin": is_admin, "filters": g, "rows": [], "next_url": "",
                               "picker": choice, "chain": chain, "errors": errors,
                               "kept": urlencode({**choice.params, **kept}), "target_example": target_example()}
    if not errors and view == "transitions":
        try:
            qs = transitions.transition_list(transitions.TransitionFilters(
                kind=g.get("kind", "")[:253], namespace=g.get("namespace", "")[:63], name=g.get("name", "")[:253],
                actor=g.get("actor", "")[:255], from_phase=g.get("from_phase", "")[:63],
                to_phase=g.get("to_phase", "")[:63], after=after, before=before),
                namespaces=choice.narrow(user_namespaces(request.user)))
            p = keyset_page(qs, "-id", cursor=g.get("cursor", ""), size=50)
            context["rows"] = p.rows
            context["next_url"] = "?" + urlencode({**choice.params, **kept, "cursor": p.next_cursor}) \
                if p.next_cursor else ""
        except InvalidFilter as exc:
            errors.append(f"{exc.field}: {exc.message}")
    elif not errors and is_admin:
        qs = action_record_list(actor=g.get("actor", "")[:150], action=g.get("action", "")[:64],
                                outcome=g.get("outcome", "")[:16], target=g.get("target", "")[:512],
                                after=after, before=before, namespaces=user_namespaces(request.user),
                                username=request.user.get_username())
        p = keyset_page(qs, "-id", cursor=g.get("cursor", ""), size=50)
        context["rows"] = p.rows
        context["next_url"] = "?" + urlencode({"view": "actions", **kept, "cursor": p.next_cursor}) \
            if p.next_cursor else ""
    context["export_query"] = urlencode({**choice.params,  # the API's exports take cluster= and cluster_label=
                                         **{k: (v if k not in ("after", "before") else
                                                (after if k == "after" else before).isoformat())
                                            for k, v in kept.items()}}) if view == "transitions" and not errors else ""
    return page(request, "console/audit.html", context, FRAGMENTS)


@console_action
@require_POST
def audit_verify(request: HttpRequest) -> HttpResponse:
    """Admins: verify every chain now (reads every transition), at most once a minute per user; recorded as
    `audit.verify` (refusals too); then back to the audit log."""
    user = request.user

    def do(detail: dict[str, Any]) -> ChainStatus | None:
        wait = audit_verify_wait(user.get_username())
        if wait > 0:
            detail["retry_after"] = math.ceil(wait)
            raise Refused(429, f"Every chain was verified at your request less than {audit_verify_interval():.0f} s "
                               f"ago; try again in {math.ceil(wait)} s.")
        status = audit_chain_status(refresh=True, namespaces=user_namespaces(user))
        if status is not None:
            detail.update({"ok": status.ok, "chains": status.chains, "transitions": status.transitions})
        return status

    result = audited_action(request, action="audit.verify", role=ADMIN, target="audit chains", reason="", do=do)
    if result.status >= 400:
        response = page(request, "console/refused.html", {"message": result.message,
                                                          "back": reverse("console:audit") + "#chain"},
                        status=result.status)
        if "retry_after" in result.detail:
            response["Retry-After"] = str(result.detail["retry_after"])
        return response
    return redirect(reverse("console:audit") + "#chain")
