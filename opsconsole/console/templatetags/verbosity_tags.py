"""`{% verbosity_panel r %}`: the detail page's "Debug logging" panel (the object's verbosity in force, and the form
operators turn it on or off with). One read of the settings (a Redis hash) per page; none answering shows as
unknown."""

from __future__ import annotations

import time
from typing import Any

from django import template

from reconcilers.engine import verbosity as engine_verbosity
from reconcilers.services import verbosity

register = template.Library()


@register.inclusion_tag("console/_detail_verbosity.html", takes_context=True)
def verbosity_panel(context: dict[str, Any], r: Any) -> dict[str, Any]:
    """The panel's context: the object's own setting, its kind's and everything's, and the form's choices."""
    try:
        settings = {s.scope: s for s in verbosity.verbosity_list()}
        error = ""
    except Exception as exc:  # noqa: BLE001 - Redis away: the panel says so, the page still renders
        settings, error = {}, f"{type(exc).__name__}: {exc}"
    found = [settings.get(f"object:{r.key}"), settings.get(f"kind:{r.kind}"), settings.get("all")]
    shown = [{"scope": s.scope, "modules": ", ".join(f"{m}={lv}" for m, lv in s.modules.items()),
              "minutes_left": max(0, int((s.until - time.time()) // 60) + 1), "actor": s.actor}
             for s in found if s is not None]
    return {"r": r, "me": context.get("me"), "csrf_token": context.get("csrf_token"), "settings": shown,
            "error": error, "annotation": engine_verbosity.ANNOTATION,
            "max_minutes": verbosity.MAX_MINUTES}
