"""The workqueue: pending, processing and backing-off keys with failure counts and next retry (the keys of the
clusters the navigation's picker chose: a key's cluster is its prefix); admins can retry a key now or reset its
backoff (the API's queue controls, recorded the same way)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from opsconsole.accounts.roles import ADMIN, user_namespaces
from opsconsole.console.access import Refused, audited_action
from opsconsole.console.clusters import cluster_choice
from opsconsole.console.live import page
from opsconsole.console.security import console_action, console_page
from reconcilers.services import queue_controls
from reconcilers.services.selectors import queue
from reconcilers.services.selectors.filters import InvalidFilter

FRAGMENTS = {"queue": "console/_queue_tables.html"}


@console_page
def queue_view(request: HttpRequest) -> HttpResponse:
    """The queue now: its keys link to their resources (one query for the page), a due time reads 'in 5 s' or
    'overdue by 3 s'; an empty queue says what it would show and how many runs the last hour had. `?cluster=`
    and `?cluster_label=` narrow it to those clusters' keys and runs."""
    namespaces = user_namespaces(request.user)
    choice = cluster_choice(request)
    try:
        snap, error = queue.queue_snapshot(namespaces=namespaces, limit=500, clusters=choice.only), ""
    except Exception as exc:  # Redis down
        snap, error = None, f"Redis did not answer: {type(exc).__name__}: {exc}"
    recent = None
    if snap is not None:
        items = [*snap["pending"], *snap["processing"], *snap["backing_off"]]
        ids = queue.resource_ids_by_key({item["key"] for item in items})
        for item in items:
            item["resource_id"] = ids.get(item["key"])
        for d in snap["backing_off"]:
            d["retry_wording"] = queue.due_wording(d["retry_due_in_seconds"])
        if not items:
            recent = queue.runs_last_hour(namespaces=namespaces, clusters=choice.only)
    return page(request, "console/queue.html", {"snap": snap, "error": error, "recent": recent, "picker": choice,
                                                "cluster_errors": choice.errors}, FRAGMENTS)


def _control(request: HttpRequest, action: str, control: Any) -> HttpResponse:
    key = request.POST.get("key", "")[:1024]

    def do(detail: dict[str, Any]) -> queue_controls.QueueControlResult:
        try:
            result = control(key)
        except InvalidFilter as exc:
            raise Refused(400, exc.message) from exc
        except Exception as exc:  # Redis down
            raise Refused(503, f"Redis did not answer: {type(exc).__name__}") from exc
        detail.update({"changed": result.changed, "failures_before": result.failures_before})
        return result

    try:
        namespace: str | None = queue_controls.queue_key_parse(key).namespace
    except InvalidFilter:
        namespace = None
    result = audited_action(request, action=action, role=ADMIN, target=key, reason="", do=do, namespace=namespace)
    if result.status == 403:
        return page(request, "console/refused.html", {"message": result.message, "back": reverse("console:queue")},
                    status=403)
    if result.status >= 400:
        messages.error(request, result.message)
    elif result.result.changed:
        messages.success(request, f"{action.split('.')[1].replace('_', ' ')}: {key}")
    else:
        messages.info(request, f"Nothing to do for {key} (it was not waiting).")
    return redirect("console:queue")


@console_action
@require_POST
def queue_retry_now(request: HttpRequest) -> HttpResponse:
    """Admin: release a backing-off key now."""
    return _control(request, "queue.retry_now", queue_controls.queue_retry_now)


@console_action
@require_POST
def queue_reset_backoff(request: HttpRequest) -> HttpResponse:
    """Admin: reset a key's failure count."""
    return _control(request, "queue.reset_backoff", queue_controls.queue_reset_backoff)
