"""The resources table (filters, search, sorting, keyset pagination, printer columns; narrowed to the clusters
the picker or `?cluster_label=` chose, with a Cluster column when several are registered, and "unknown since …"
for the rows of an unreachable cluster) and its bulk Reconcile of the checked rows (operators)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from opsconsole.accounts.roles import OPERATOR, user_namespaces
from opsconsole.console.access import Refused, audited_action
from opsconsole.console.clusters import cluster_choice
from opsconsole.console.jsonpath import evaluate
from opsconsole.console.live import page
from opsconsole.console.paging import keyset_page
from opsconsole.console.security import console_action, console_page
from reconcilers.services.reconcile_actions import resource_reconcile_selection
from reconcilers.services.selectors import kinds, resources
from reconcilers.services.selectors.cluster_health import REMOVED, UNREACHABLE, cluster_state
from reconcilers.services.selectors.filters import InvalidFilter

FRAGMENTS = {"rows": "console/_resources_rows.html"}
FILTER_KEYS = ("kind", "namespace", "phase", "selector", "q", "stuck", "lag", "deleted", "healing", "anomaly", "sort",
               "size", "cluster", "cluster_label")
SORTS = [("name", "Name"), ("namespace", "Namespace"), ("kind", "Kind"), ("phase", "Phase"),
         ("since", "Time in phase"), ("last", "Last reconcile")]


def _filters(get: Any) -> tuple[resources.ResourceFilters, list[str]]:
    errors = []
    stuck = None
    if get.get("stuck"):
        try:
            stuck = float(get["stuck"]) * 60
        except ValueError:
            errors.append("stuck: give minutes as a number")
    lag = {"1": True, "0": False}.get(get.get("lag", ""))
    phase = get.get("phase", "")[:63]
    # deleted objects stay on record: listed with `deleted=1`, or when a terminal phase (Deleted) is asked for
    terminal = {s for k in kinds.kind_list() for s in k["state_machine"]["terminal"]}
    return resources.ResourceFilters(
        kind=get.get("kind", "")[:253], namespace=get.get("namespace", "")[:63], phase=phase,
        selector=get.get("selector", "")[:1024], search=get.get("q", "")[:253], stuck_for=stuck,
        generation_lag=lag, include_deleted=get.get("deleted") == "1" or phase in terminal,
        healing=get.get("healing", "") if get.get("healing", "") in resources.HEALING_STATES else "",
        anomaly=get.get("anomaly", "")[:63]), errors


def _object_of(r: Any) -> dict[str, Any]:
    """The mirrored resource as the object printer-column JSONPaths are written against."""
    return {"metadata": {"name": r.name, "namespace": r.namespace, "labels": r.labels, "generation": r.generation,
                         "creationTimestamp": r.created_at.isoformat() if r.created_at else ""},
            "spec": r.spec, "status": r.status}


@console_page
def resource_list(request: HttpRequest) -> HttpResponse:
    """The table."""
    choice = cluster_choice(request)
    namespaces = choice.narrow(user_namespaces(request.user))
    filters, errors = _filters(request.GET)
    errors = [*choice.errors, *errors]
    columns: list[dict[str, Any]] = []
    machine_states: list[str] = []
    kind_rows = kinds.kind_list()
    chosen = next((k for k in kind_rows if filters.kind and filters.kind.lower() in
                   (k["kind"].lower(), k["plural"])), None)
    if chosen:
        all_columns = kinds.kind_printer_columns(chosen["group"], chosen["plural"], chosen["version"])
        columns = [c for c in all_columns if c["priority"] == 0 and c["name"] not in ("Phase", "Age")]
        machine_states = chosen["state_machine"]["states"]
    else:
        machine_states = sorted({s for k in kind_rows for s in k["state_machine"]["states"]})
    try:
        size = max(10, min(200, int(request.GET.get("size", "50"))))
    except ValueError:
        size = 50
    rows_page = None
    if not errors:
        try:
            qs = resources.resource_list(filters, namespaces=namespaces)
            rows_page = keyset_page(qs, request.GET.get("sort", "name"), cursor=request.GET.get("cursor", ""),
                                    size=size)
        except InvalidFilter as exc:
            errors.append(exc.message if not exc.field else f"{exc.field}: {exc.message}")
    rows = []
    if rows_page is not None:
        children = resources.resource_children_map(rows_page.rows)
        unknown = {c.name: since for c in choice.clusters
                   for state, since in [cluster_state(c)] if state in (UNREACHABLE, REMOVED)}
        for r in rows_page.rows:
            obj = _object_of(r)
            rows.append({"r": r, "cells": [_cell(evaluate(c["jsonPath"], obj)) for c in columns],
                         "children": len(children.get(r.uid, [])), "unknown_since": unknown.get(r.cluster)})
    kept = {k: request.GET[k] for k in FILTER_KEYS if request.GET.get(k)}
    next_url = ("?" + urlencode({**kept, "cursor": rows_page.next_cursor})) if rows_page and rows_page.next_cursor \
        else ""
    context = {
        "rows": rows, "columns": columns, "errors": errors, "filters": request.GET, "kinds": kind_rows,
        "states": machine_states, "sorts": SORTS, "sort": rows_page.sort if rows_page else "name",
        "next_url": next_url, "first_url": "?" + urlencode(kept) if request.GET.get("cursor") else "",
        "sort_urls": {name: "?" + urlencode({**kept, "sort": ("-" if rows_page and rows_page.sort == name else "")
                                                        + name}) for name, _ in SORTS},
        "here": request.get_full_path(), "size": size, "picker": choice, "cluster_column": len(choice.clusters) > 1,
    }
    return page(request, "console/resources.html", context, FRAGMENTS)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


@console_action
@require_POST
def resource_reconcile_selected(request: HttpRequest) -> HttpResponse:
    """Bulk Reconcile of the checked rows (operators), through the shared service, recorded."""
    reason = request.POST.get("reason", "").strip()[:2000]
    try:
        ids = [int(i) for i in request.POST.getlist("ids")][:1000]
    except ValueError:
        ids = []
    ids = [i for i in ids if 0 < i < 2**63]  # no row has another id (and SQLite cannot compare a bigger one)
    back = request.POST.get("next", "")
    if not back.startswith("/") or back.startswith("//"):
        back = reverse("console:resources")

    def do(detail: dict[str, Any]) -> Any:
        if not reason:
            raise Refused(400, "Give a reason: it is recorded with each request.")
        if "\x00" in reason:
            raise Refused(400, "The reason must not contain NUL characters.")
        try:
            outcome = resource_reconcile_selection(ids, actor=f"user:{request.user.get_username()}", reason=reason,
                                                   namespaces=user_namespaces(request.user))
        except InvalidFilter as exc:
            raise Refused(400, exc.message) from exc
        detail.update({"matched": outcome.matched, "requested": [str(r.pk) for r in outcome.requested],
                       "failed": [f.resource.key for f in outcome.failed]})
        return outcome

    result = audited_action(request, action="resource.reconcile_bulk", role=OPERATOR,
                            target=f"ids={','.join(map(str, ids[:50]))}", reason=reason, do=do)
    if result.status == 403:
        return page(request, "console/refused.html", {"message": result.message}, status=403)
    if result.status >= 400:
        messages.error(request, result.message)
    else:
        o = result.result
        text = f"Reconcile requested for {len(o.requested)} of {o.matched} selected resources."
        if o.failed:
            text += " Failed: " + "; ".join(f"{f.resource} ({f.error})" for f in o.failed[:5])
        (messages.warning if o.failed else messages.success)(request, text)
    return redirect(back)
