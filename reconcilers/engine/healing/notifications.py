"""Notifications of the healing records that need a person, through a durable outbox (`NotificationDelivery`).

What is notified: `rollback.failed`, `rollback.refused`, and `anomaly.detected` of an anomaly that needs a person
(`person`: a rule that does not roll back, or automatic rollback off; `rollback_failed` itself is told by the
escalation's own record). `outbox_add_locked`, called by `records.healing_append` in the record's transaction,
adds one pending row per configured receiver, with the payload: a record on the chain is never without its
notifications, and a controller killed before delivering them delivers them after.

Receivers (`OPSCONSOLE_NOTIFICATIONS`, a list of `{"name", "url", "format", "headers", "timeout", "retries",
"backoff"}`): `format` `alertmanager` posts the Alertmanager v2 `POST /api/v2/alerts` body (a list of alerts with
labels, annotations, startsAt, endsAt, generatorURL); `json` posts one JSON object about the record.

`deliver_due` (the evaluator's step, while the controller leads) sends what is due, at most `limit` rows and
`budget` seconds per step, each POST bounded by the receiver's `timeout`: a 2xx is delivered; anything else is
recorded on the row (`attempts`, `last_status`, `last_error`) and tried again after `backoff * 2**(attempts-1)`
seconds (at most an hour), until `retries` retries have failed: then the row is `failed` and logged. A row is
claimed by a conditional UPDATE before its POST, so two stepping controllers never send it twice at once: with
several clusters every cluster's controller steps and calls it, and the outbox (of every cluster) needs no leader
of its own.

Headers (tokens) are never stored or logged: the row keeps the URL without its user info and query string, and an
error text is scrubbed of the header values.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import urllib3
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from reconcilers.engine import metrics
from reconcilers.engine.healing.person import object_rules, person_needed
from reconcilers.models import HealingAction, HealingRecord, NotificationDelivery, Resource

ALERTMANAGER, JSON = "alertmanager", "json"
FORMATS = (ALERTMANAGER, JSON)
NOTIFIED = (HealingAction.ROLLBACK_FAILED, HealingAction.ROLLBACK_REFUSED, HealingAction.ANOMALY_DETECTED)
BACKOFF_CAP = 3600.0
ERROR_MAX = 500
#: how long an alert posted to Alertmanager stays firing there (endsAt), unless the receiver says `resolve_seconds`
RESOLVE_SECONDS = 3600.0

log = logging.getLogger(__name__)
_pool = urllib3.PoolManager(num_pools=8, retries=False)


class ReceiverError(ValueError):
    """A receiver setting that cannot be used; the message names the receiver and the field."""


@dataclass(frozen=True)
class Receiver:
    """One configured receiver (OPSCONSOLE_NOTIFICATIONS)."""

    name: str
    url: str
    format: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 3.0
    retries: int = 5
    backoff: float = 10.0
    resolve_seconds: float = RESOLVE_SECONDS

    @classmethod
    def from_dict(cls, raw: Any, index: int) -> Receiver:
        """Parse one receiver; ReceiverError naming the field."""
        where = f"OPSCONSOLE_NOTIFICATIONS[{index}]"
        if not isinstance(raw, dict):
            raise ReceiverError(f"{where}: a receiver is an object")
        unknown = sorted(set(raw) - {"name", "url", "format", "headers", "timeout", "retries", "backoff",
                                     "resolve_seconds"})
        if unknown:
            raise ReceiverError(f"{where}.{unknown[0]}: unknown field")
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 63:
            raise ReceiverError(f"{where}.name: a name of 1 to 63 characters is required")
        url = raw.get("url")
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ReceiverError(f"{where}.url: an http:// or https:// URL is required")
        fmt = raw.get("format", JSON)
        if fmt not in FORMATS:
            raise ReceiverError(f"{where}.format: one of {', '.join(FORMATS)}")
        headers = raw.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in headers.items()):
            raise ReceiverError(f"{where}.headers: an object of strings")
        numbers: dict[str, Any] = {}
        for key, low, high, kind in (("timeout", 0.1, 60, float), ("retries", 0, 100, int),
                                     ("backoff", 0, 3600, float), ("resolve_seconds", 60, 30 * 86400, float)):
            if key in raw:
                value = raw[key]
                if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high \
                        or (kind is int and value != int(value)):
                    raise ReceiverError(f"{where}.{key}: a number from {low} to {high}")
                numbers[key] = kind(value)
        return cls(name.strip(), url, fmt, dict(headers), **numbers)


def receivers() -> list[Receiver]:
    """The configured receivers (ReceiverError for a bad one, or two of the same name)."""
    configured = getattr(settings, "OPSCONSOLE_NOTIFICATIONS", None) or []
    if not isinstance(configured, list):
        raise ReceiverError("OPSCONSOLE_NOTIFICATIONS: a list of receivers")
    out = [Receiver.from_dict(raw, i) for i, raw in enumerate(configured)]
    names = [r.name for r in out]
    if len(set(names)) != len(names):
        raise ReceiverError("OPSCONSOLE_NOTIFICATIONS: two receivers have the same name")
    return out


def shown_url(url: str) -> str:
    """The URL as stored and logged: no user info, no query string or fragment (they may hold a token)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "…" if parts.query else "", ""))


# -- the outbox ------------------------------------------------------------------------------------------------


def needs_notice(resource: Resource, record: HealingRecord) -> bool:
    """Whether `record` is one a person must hear about (see the module docstring)."""
    if record.action in (HealingAction.ROLLBACK_FAILED, HealingAction.ROLLBACK_REFUSED):
        # a write refused without escalation (a conflict the automatic path tries again; a person's own rollback,
        # whose answer told them) needs nobody else
        return not (isinstance(record.detail, dict) and record.detail.get("escalated") is False)
    if record.action != HealingAction.ANOMALY_DETECTED or record.rule == metrics.ROLLBACK_FAILED_RULE:
        return False
    rules, auto = object_rules(resource)
    return person_needed(record.rule, rules, auto, record.detail if isinstance(record.detail, dict) else None)


def outbox_add_locked(resource: Resource, record: HealingRecord) -> list[NotificationDelivery]:
    """In the record's transaction: a pending delivery per receiver when the record needs a person. A bad
    receiver setting is logged and adds nothing (the record is written regardless)."""
    if record.action not in NOTIFIED or not getattr(settings, "OPSCONSOLE_NOTIFICATIONS", None):
        return []
    try:
        configured = receivers()
    except ReceiverError as exc:
        log.warning("notifications: %s", exc)
        return []
    if not configured or not needs_notice(resource, record):
        return []
    rows = [NotificationDelivery(record=record, receiver=r.name, url=shown_url(r.url), payload=payload(r, resource,
                                                                                                       record),
                                 next_attempt_at=record.created_at) for r in configured]
    return NotificationDelivery.objects.bulk_create(rows)


def _summary(resource: Resource, record: HealingRecord) -> str:
    what = {HealingAction.ROLLBACK_FAILED: "a rollback failed", HealingAction.ROLLBACK_REFUSED:
            "an automatic rollback could not be done"}.get(record.action, f"anomaly {record.rule}")
    where = f"{resource.namespace}/{resource.name}" if resource.namespace else resource.name
    return f"{resource.kind} {where}: {what}; a person must decide"


def console_url(resource: Resource) -> str:
    """The resource's Healing panel in the console (OPSCONSOLE_CONSOLE_URL; '' when unset)."""
    base = str(getattr(settings, "OPSCONSOLE_CONSOLE_URL", "") or "").rstrip("/")
    return f"{base}/resources/{resource.pk}/#healing" if base else ""


def payload(receiver: Receiver, resource: Resource, record: HealingRecord) -> Any:
    """The body posted to `receiver` about `record` (no secret: it is stored on the row)."""
    at = record.created_at
    if receiver.format == ALERTMANAGER:
        escalated = record.action != HealingAction.ANOMALY_DETECTED
        labels = {"alertname": "OpsconsoleRollbackFailed" if escalated else "OpsconsoleAnomalyNeedsPerson",
                  "severity": "critical" if escalated else "warning", "kind": resource.kind,
                  "namespace": resource.namespace, "name": resource.name,
                  "rule": record.rule or metrics.ROLLBACK_FAILED_RULE, "action": record.action}
        annotations = {"summary": _summary(resource, record), "description": record.message,
                       "reason": record.reason, "actor": record.actor, "generation": str(record.generation),
                       "record": f"{resource.uid}#{record.seq}", "hash": record.hash}
        return [{"labels": {k: v for k, v in labels.items() if v != ""},
                 "annotations": {k: v for k, v in annotations.items() if v != ""},
                 "startsAt": at.isoformat(), "endsAt": (at + timedelta(seconds=receiver.resolve_seconds)).isoformat(),
                 "generatorURL": console_url(resource)}]
    return {"action": record.action, "summary": _summary(resource, record), "kind": resource.kind,
            "namespace": resource.namespace, "name": resource.name, "uid": resource.uid, "rule": record.rule,
            "generation": record.generation, "actor": record.actor, "reason": record.reason,
            "message": record.message, "record": {"seq": record.seq, "hash": record.hash},
            "at": at.isoformat(), "url": console_url(resource)}


# -- delivering --------------------------------------------------------------------------------------------------


@dataclass
class Sent:
    """What one `deliver_due` call did."""

    delivered: int = 0
    retrying: int = 0
    failed: int = 0


def deliver_due(now: datetime | None = None, *, limit: int | None = None, budget: float | None = None) -> Sent:
    """Send the deliveries that are due (see the module docstring)."""
    sent = Sent()
    limit = int(limit if limit is not None else getattr(settings, "OPSCONSOLE_NOTIFICATION_BATCH", 10))
    budget = float(budget if budget is not None else getattr(settings, "OPSCONSOLE_NOTIFICATION_STEP_SECONDS", 5))
    started = time.monotonic()
    now = now or timezone.now()
    due = list(NotificationDelivery.objects.filter(state=NotificationDelivery.State.PENDING, next_attempt_at__lte=now)
               .order_by("next_attempt_at", "id")[:limit])
    if not due:
        return sent
    try:
        by_name = {r.name: r for r in receivers()}
    except ReceiverError as exc:
        log.warning("notifications: %s", exc)
        return sent
    for row in due:
        if time.monotonic() - started > budget:
            break
        receiver = by_name.get(row.receiver)
        if receiver is None:
            _conclude(row, None, "the receiver is no longer configured", final=True, now=now)
            sent.failed += 1
            continue
        # claim it: another controller stepping at the same time skips it (the lease outlasts the POST)
        lease = timezone.now() + timedelta(seconds=receiver.timeout * 2 + 5)
        if not NotificationDelivery.objects.filter(pk=row.pk, state=row.state, attempts=row.attempts,
                                                   next_attempt_at=row.next_attempt_at).update(next_attempt_at=lease):
            continue
        status, error = _post(receiver, row.payload)
        row.refresh_from_db()
        if status is not None and 200 <= status < 300:
            NotificationDelivery.objects.filter(pk=row.pk).update(
                state=NotificationDelivery.State.DELIVERED, attempts=F("attempts") + 1, last_status=status,
                last_error="", delivered_at=timezone.now())
            sent.delivered += 1
            continue
        final = row.attempts + 1 > receiver.retries
        _conclude(row, status, error, final=final, now=timezone.now(), receiver=receiver)
        if final:
            sent.failed += 1
        else:
            sent.retrying += 1
    return sent


def _conclude(row: NotificationDelivery, status: int | None, error: str, *, final: bool, now: datetime,
              receiver: Receiver | None = None) -> None:
    attempts = row.attempts + (0 if receiver is None else 1)
    fields: dict[str, Any] = {"attempts": attempts, "last_status": status, "last_error": error[:ERROR_MAX]}
    if final:
        fields["state"] = NotificationDelivery.State.FAILED
        log.warning("notifications: giving up on healing record %s for %s (%s) after %d attempts: %s",
                    row.record_id, row.receiver, row.url, attempts, error[:ERROR_MAX])
    else:
        assert receiver is not None
        delay = min(BACKOFF_CAP, receiver.backoff * 2 ** (attempts - 1))
        fields["next_attempt_at"] = now + timedelta(seconds=delay)
    NotificationDelivery.objects.filter(pk=row.pk).update(**fields)


def _post(receiver: Receiver, body: Any) -> tuple[int | None, str]:
    """POST `body` as JSON: (status, error text scrubbed of the header values); status None: no answer."""
    headers = {"Content-Type": "application/json", "User-Agent": "opsconsole-notifications",
               **receiver.headers}
    try:
        response = _pool.request("POST", receiver.url, body=json.dumps(body).encode(), headers=headers,
                                 timeout=urllib3.Timeout(connect=receiver.timeout, read=receiver.timeout),
                                 redirect=False, preload_content=False)
        try:
            text = response.read(ERROR_MAX, decode_content=True).decode("utf-8", "replace") \
                if not 200 <= response.status < 300 else ""
        finally:
            response.release_conn()
        error = "" if 200 <= response.status < 300 else f"HTTP {response.status}: {text}".strip()
        return response.status, _scrub(error, receiver)
    except urllib3.exceptions.TimeoutError:
        return None, f"no answer within {receiver.timeout:g}s"
    except urllib3.exceptions.NewConnectionError:
        return None, "could not connect"
    except urllib3.exceptions.HTTPError as exc:
        return None, _scrub(type(exc).__name__, receiver)
    except OSError as exc:
        return None, type(exc).__name__


def _scrub(text: str, receiver: Receiver) -> str:
    for value in receiver.headers.values():
        if value:
            text = text.replace(value, "…")
    parts = urlsplit(receiver.url)
    for secret in (parts.query, parts.password or "", parts.username or ""):
        if secret:
            text = text.replace(secret, "…")
    return text


def delivery_state(row: NotificationDelivery) -> str:
    """How the console and the API name a delivery: delivered, pending (never tried), retrying, failed."""
    if row.state == NotificationDelivery.State.PENDING:
        return "retrying" if row.attempts else "pending"
    return str(row.state)
