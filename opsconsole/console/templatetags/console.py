"""Template helpers of the console: relative times with the absolute time on hover, durations, phase badges,
YAML of JSON documents, actors with how they were established. Every helper escapes what it is given (CR data is
untrusted)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml
from django import template
from django.utils import timezone
from django.utils.html import format_html

from reconcilers.core import actors
from reconcilers.core.meta import parse_rfc3339
from reconcilers.services.selectors import kinds

register = template.Library()

_PHASE_CLASS = {
    "Running": "ok", "Ready": "ok", "Succeeded": "ok", "success": "ok", "succeeded": "ok", "True": "ok",
    "Pending": "wait", "Terminating": "wait", "requested": "wait", "picked_up": "wait", "requeue": "wait",
    "requeue_after": "wait", "Unknown": "wait",
    "Degraded": "warn", "Warning": "warn",
    "Failed": "bad", "error": "bad", "failed": "bad", "False": "bad", "refused": "bad",
    "Deleted": "off",
}


def ago(seconds: float) -> str:
    """A short relative time: '42 s', '5 min', '3 h', '2 d'."""
    s = abs(seconds)
    if s < 60:
        return f"{int(s)} s"
    if s < 3600:
        return f"{int(s // 60)} min"
    if s < 86400:
        return f"{int(s // 3600)} h"
    return f"{int(s // 86400)} d"


@register.simple_tag
def reltime(moment: datetime | None, suffix: str = " ago") -> str:
    """`<time>` showing the time relative to now, with the absolute UTC time on hover (console.js keeps the
    relative text current)."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', "never")
    if isinstance(moment, str):
        parsed = parse_rfc3339(moment)
        if parsed is None:  # not a timestamp: shown as it is
            return format_html('<span class="muted">{}</span>', moment)
        moment = parsed
    absolute = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    delta = (timezone.now() - moment).total_seconds()
    text = f"in {ago(delta)}" if delta < -1 else f"{ago(delta)}{suffix}"
    return format_html('<time datetime="{}" title="{}" data-rel="{}">{}</time>',
                       moment.isoformat(), absolute, suffix, text)


@register.filter
def since_seconds(moment: datetime | None) -> float | None:
    """Seconds from `moment` to now."""
    return None if moment is None else (timezone.now() - moment).total_seconds()


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds as '850 ms', '4.2 s', '3 min', '2 h'."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return ago(seconds)


#: a phase's semantic class (`Reconciler.phase_class`) → the badge colour
SEMANTIC_BADGE = {"ready": "ok", "progressing": "wait", "warning": "warn", "failed": "bad", "terminal": "off"}


@register.simple_tag
def badge(value: str | None) -> str:
    """A coloured badge for a phase, a run result, a request state or a condition status. A phase of a
    registered kind is coloured by its semantic class (the first kind declaring the phase wins) and says the
    class in words for screen readers too (colour is never the only signal); other values keep their colours."""
    text = value or "—"
    semantic = kinds.phase_class_map().get(text) if value else None
    if semantic is not None:
        return format_html('<span class="badge badge-{} phase-{}">{}<span class="sr-only"> ({})</span></span>',
                           SEMANTIC_BADGE.get(semantic, "none"), semantic, text, semantic)
    return format_html('<span class="badge badge-{}">{}</span>', _PHASE_CLASS.get(text, "none"), text)


class _TextDumper(yaml.SafeDumper):
    """SafeDumper writing a multi-line string as a literal block (`|`), the way a person writes one, instead of
    a quoted scalar whose line breaks show doubled. PyYAML itself falls back to quoting a string that a block
    cannot hold exactly (trailing spaces on a line, control characters)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_TextDumper.add_representer(str, _str)


@register.filter
def as_yaml(value: Any) -> str:
    """A JSON document as block YAML (escaped by the template), multi-line strings as literal blocks."""
    if value in (None, {}, []):
        return "{}"
    text = yaml.dump(value, Dumper=_TextDumper, sort_keys=True, default_flow_style=False, allow_unicode=True)
    if "\n" not in text.rstrip() or "|" not in text:
        return text.rstrip()
    # a literal block last keeps its final line break only with the document's: it must read back the same
    return text.rstrip() if yaml.safe_load(text.rstrip()) == value else text


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    """mapping[key] or ''."""
    return (mapping or {}).get(key, "")


#: the words shown after an actor, by how it was established (reconcilers.core.actors); an identity the engine or
#: opsconsole established needs none
_ESTABLISHED_NOTE = {
    "admission": ("kube", "ok", "authenticated by the Kubernetes API server (admission review)"),
    "claim": ("claim", "warn", "field manager (unverified): a name any client may send, not an identity"),
    "unknown": ("unverified", "warn", "nobody could be established"),
}


@register.filter
def actor_shown(actor: str | None) -> str:
    """An actor with how it was established: a field-manager name is marked as a claim ("claim" badge, "field
    manager (unverified)" on hover and for screen readers), a Kubernetes user as authenticated by the API server,
    nobody as unverified; the engine's and opsconsole's own identities as they are."""
    text = actor or "unknown"
    note = _ESTABLISHED_NOTE.get(actors.established(actor))
    if note is None:
        return format_html('<span class="actor">{}</span>', text)
    label, tone, words = note
    return format_html('<span class="actor actor-{}" title="{}">{}</span> <span class="badge badge-{} '
                       'actor-established">{}<span class="sr-only"> ({})</span></span>', label, words, text, tone,
                       label, words)


#: condition types whose True is abnormal (kstatus' "abnormal-true" polarity, and the engine's healing conditions):
#: their False is the good state. True of these is bad, or in progress where it only says work is going on
_ABNORMAL_TRUE = {"Stalled": "bad", "AnomalyDetected": "bad", "RollbackFailed": "bad", "Reconciling": "wait",
                  "RollingBack": "wait"}
_TONE_WORDS = {"ok": "good", "bad": "bad", "wait": "in progress", "none": "unknown"}


@register.simple_tag
def condition_badge(type_: str | None, status: str | None) -> str:
    """A condition's status coloured by its polarity, as kstatus reads it: `Ready=True` is good, and so are
    `Stalled=False` and `Reconciling=False`; `AnomalyDetected=True` (and `Stalled=True`, `RollbackFailed=True`)
    is bad, `Reconciling=True` in progress; `Unknown` is in progress either way. The tone is said in words for
    screen readers too (colour is never the only signal)."""
    text = status or "—"
    abnormal = _ABNORMAL_TRUE.get(str(type_ or ""))
    if text == "Unknown":
        tone = "wait"
    elif text == "True":
        tone = abnormal or "ok"
    elif text == "False":
        tone = "ok" if abnormal else "bad"
    else:
        tone = "none"
    return format_html('<span class="badge badge-{} condition-status" data-condition="{}">{}<span class="sr-only">'
                       ' ({})</span></span>', tone, type_ or "", text, _TONE_WORDS[tone])
