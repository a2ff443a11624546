"""Server-rendered inline SVG of a kind's state machine, laid out by Graphviz (`graph_layout`): states coloured
by their semantic class (ready, progressing, warning, failed, terminal; the same classes as the badges) with
their resources now and how long those have been there (median / max), edges drawn faint until something
took them and labelled with their transitions (last hour / last day) only then, a resource's path marked
with the order and time of each step, every state a link to its resources (the line charts are in
`linechart`). An edge's label is a number on the edge, placed clear of the states and the other numbers
(`edge_marks`), and its text in a legend beside the drawing: long labels of neighbouring edges overlapped.
Every text is escaped; no inline style (the CSP forbids it): colours come from classes in console.css."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from opsconsole.console import edge_marks
from opsconsole.console.graph_layout import NODE_H, NODE_W, machine_layout
from opsconsole.console.templatetags.console import SEMANTIC_BADGE, duration

#: a glyph per semantic class: the state's class shows in its shape of text, not only in its colour
CLASS_GLYPH = {"ready": "✓", "progressing": "…", "warning": "!", "failed": "✕", "terminal": "■"}
#: one step of a resource: (order number, from phase, to phase, when)
Step = tuple[int, str, str, datetime]


def _clock(moment: datetime, fmt: str = "%H:%M") -> str:
    return (timezone.localtime(moment) if timezone.is_aware(moment) else moment).strftime(fmt)


def _visits(steps: Sequence[Step], now: datetime) -> dict[str, tuple[int, float]]:
    """Per state: how many times the resource entered it and the seconds it spent there in all (the current
    stay until now)."""
    out: dict[str, tuple[int, float]] = {}
    ordered = sorted(steps, key=lambda s: s[0])
    for i, (_, _, to, at) in enumerate(ordered):
        until = ordered[i + 1][3] if i + 1 < len(ordered) else now
        n, total = out.get(to, (0, 0.0))
        out[to] = (n + 1, total + max(0.0, (until - at).total_seconds()))
    return out


def state_machine_svg(
    machine: dict[str, Any],
    *,
    counts: dict[str, int] | None = None,
    hour: dict[tuple[str, str], int] | None = None,
    day: dict[tuple[str, str], int] | None = None,
    dwell: dict[str, float] | None = None,
    dwell_now: dict[str, dict[str, float]] | None = None,
    current: str = "",
    path: Sequence[tuple[str, str]] = (),
    steps: Sequence[Step] = (),
    classes: dict[str, str] | None = None,
    state_href: Callable[[str], str] | None = None,
    label: str = "",
    now: datetime | None = None,
) -> SafeString:
    """The machine as an `<svg>`. `counts`: the resources in each state now; `dwell_now`: {state: {"median",
    "max"}} seconds they have been there; `dwell`: the median seconds before leaving (in the state's title);
    `hour`/`day`: transitions per edge (an edge none took in the day is faint and unlabelled); `current` and
    `path` (edges) or `steps` (a resource's transitions, numbered, with their times) are marked; `classes`:
    each state's semantic class (default: the machine's own `classes`, else progressing);
    `state_href(state)` makes each state a link."""
    layout = machine_layout(machine)
    now = now or timezone.now()
    classes = classes if classes is not None else machine.get("classes") or {}
    prefix = "sm-" + (re.sub(r"[^A-Za-z0-9_-]", "-", label or machine["name"]) or "m")
    taken_steps: dict[tuple[str, str], list[Step]] = {}
    for step in steps:
        taken_steps.setdefault((step[1], step[2]), []).append(step)
    taken = set(path) | set(taken_steps)
    visits = _visits(steps, now) if steps else {}
    width, height = layout.width, layout.height
    parts = [f'<svg class="machine graph" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
             f'height="{height:.0f}" role="img" aria-label="{escape(label or machine["name"])} state machine" '
             f'data-layout="{layout.engine}">', "<defs>"]
    for kind in ("faint", "active", "taken"):
        parts.append(f'<marker id="{prefix}-{kind}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="11" '
                     f'markerHeight="11" markerUnits="userSpaceOnUse" orient="auto">'
                     f'<path d="M0,0 L10,5 L0,10 z" class="arrowhead arrowhead-{kind}"/></marker>')
    parts.append("</defs>")
    labelled: list[tuple[tuple[str, str], Any, str, bool]] = []  # (edge, route, text, taken): numbered, legend
    counted = hour is not None or day is not None
    for e in machine["transitions"]:
        edge = (e["from"], e["to"])
        route = layout.edges.get(edge)
        if route is None:
            continue
        n_hour, n_day = (hour or {}).get(edge, 0), (day or {}).get(edge, 0)
        klass, marker = "edge", "faint"
        if edge in taken:
            klass, marker = "edge taken", "taken"
        elif n_day or n_hour:
            klass, marker = "edge active", "active"
        else:
            klass += " faint"
        title = f"{e['from']} → {e['to']}"
        if counted:
            title += f": {n_hour} in the last hour, {n_day} in the last day"
        these = sorted(taken_steps.get(edge, []), key=lambda s: s[0])
        if these:
            title += "; this resource: " + ", ".join(f"#{s[0]} at {_clock(s[3], '%Y-%m-%d %H:%M:%S')}" for s in these)
        parts.append(f'<g class="{klass}" data-edge="{escape(e["from"])}→{escape(e["to"])}">'
                     f'<title>{escape(title)}</title>'
                     f'<path d="{route.d()}" marker-end="url(#{prefix}-{marker})"/></g>')
        text = ""
        if these:
            text = ",".join(f"#{s[0]}" for s in these[-3:]) + f" {_clock(these[-1][3])}"
            if len(these) > 3:
                text = "…" + text
        elif counted and (n_hour or n_day):
            text = f"{n_hour}/{n_day}"
        if text:
            labelled.append((edge, route, text, bool(these)))
    marks = edge_marks.place([r for _, r, _, _ in labelled], list(layout.nodes.values()), width, height)
    for n, ((edge, _, text, on_path), (mx, my)) in enumerate(zip(labelled, marks, strict=True), start=1):
        # drawn after every edge so that no curve crosses a number
        parts.append(f'<g class="edge-mark{" taken" if on_path else ""}" data-edge="{escape(edge[0])}→'
                     f'{escape(edge[1])}" data-n="{n}"><title>{n}: {escape(edge[0])} → {escape(edge[1])}: '
                     f'{escape(text)}</title><circle cx="{mx:.1f}" cy="{my:.1f}" r="{edge_marks.RADIUS:.0f}"/>'
                     f'<text x="{mx:.1f}" y="{my + 4:.1f}" text-anchor="middle" class="edge-mark-n">{n}</text></g>')
    for s in machine["states"]:
        cx, cy = layout.nodes[s]
        x, y = cx - NODE_W / 2, cy - NODE_H / 2
        semantic = classes.get(s, "progressing")
        klass = f"state st-{SEMANTIC_BADGE.get(semantic, 'none')} cls-{semantic}"
        if s == current:
            klass += " current"
        if s in machine.get("terminal", []):
            klass += " terminal"
        if s == machine["initial"]:
            klass += " initial"
        if s in visits:
            klass += " visited"
        count = (counts or {}).get(s)
        now_figures = (dwell_now or {}).get(s) or {}
        title = f"{s} ({semantic})"
        if counts is not None:
            title += f": {count or 0} resource{'' if count == 1 else 's'}"
        if now_figures.get("n"):
            title += (f", there for a median {duration(now_figures.get('median'))}, "
                      f"the longest {duration(now_figures.get('max'))}")
        if dwell and s in dwell:
            title += f", median {duration(dwell[s])} before leaving"
        if s in visits:
            title += f"; this resource entered it {visits[s][0]}× and spent {duration(visits[s][1])} there"
            if s == current:
                title += " (it is there now)"
        lines = []
        if counts is not None:
            lines.append(f"{count or 0} now")
        if now_figures.get("n"):
            lines.append(f"{duration(now_figures.get('median'))} / {duration(now_figures.get('max'))}")
        if s in visits:
            lines.append(f"{visits[s][0]}× · {duration(visits[s][1])}")
        body = [f"<title>{escape(title)}</title>",
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W:.0f}" height="{NODE_H:.0f}" rx="9"/>',
                f'<text x="{cx:.1f}" y="{y + 22:.1f}" text-anchor="middle" class="state-name">{escape(s)}</text>',
                f'<text x="{x + NODE_W - 10:.1f}" y="{y + 18:.1f}" text-anchor="end" class="state-glyph" '
                f'aria-hidden="true">{CLASS_GLYPH.get(semantic, "")}</text>']
        for i, line in enumerate(lines[:2]):
            body.append(f'<text x="{cx:.1f}" y="{y + 42 + 17 * i:.1f}" text-anchor="middle" '
                        f'class="state-sub">{escape(line)}</text>')
        group = f'<g class="{klass}" data-state="{escape(s)}" data-class="{semantic}">{"".join(body)}</g>'
        if state_href is not None:
            group = f'<a href="{escape(state_href(s))}" class="state-link">{group}</a>'
        parts.append(group)
    parts.append("</svg>")
    if labelled:
        head = "steps (the latest at)" if steps else "last hour / last day"
        rows = "".join(f'<tr class="edge-label{" taken" if on_path else ""}" data-edge="{escape(edge[0])}→'
                       f'{escape(edge[1])}"><th scope="row">{n}</th><td>{escape(edge[0])} → {escape(edge[1])}</td>'
                       f'<td>{escape(text)}</td></tr>'
                       for n, (edge, _, text, on_path) in enumerate(labelled, start=1))
        parts.append(f'<table class="table edge-legend small"><caption class="sr-only">The numbered edges of the '
                     f'{escape(label or machine["name"])} state machine</caption><thead><tr><th scope="col">#</th>'
                     f'<th scope="col">edge</th><th scope="col">{head}</th></tr></thead><tbody>{rows}</tbody>'
                     f'</table>')
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above is escaped
