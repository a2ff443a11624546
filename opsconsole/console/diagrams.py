"""Server-rendered inline SVG: a kind's state machine (states with their counts and median dwell time, edges
with their transition counts, the current state and a resource's path highlighted, every state a link to its
resources) and small line charts. Every text is escaped; no inline style (the CSP forbids it): colours come
from classes in console.css."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from opsconsole.console.templatetags.console import duration

NODE_W, NODE_H, COL_GAP, ROW_GAP, PAD = 150, 58, 90, 36, 24


@dataclass
class _Node:
    name: str
    x: float
    y: float


def _layers(machine: dict[str, Any]) -> dict[str, int]:
    """Each state's column: its distance from the initial state (breadth first)."""
    succ: dict[str, list[str]] = {}
    for e in machine["transitions"]:
        succ.setdefault(e["from"], []).append(e["to"])
    depth = {machine["initial"]: 0}
    frontier = [machine["initial"]]
    while frontier:
        nxt = []
        for s in frontier:
            for t in succ.get(s, []):
                if t not in depth:
                    depth[t] = depth[s] + 1
                    nxt.append(t)
        frontier = nxt
    for s in machine["states"]:
        depth.setdefault(s, 0)
    return depth


def _layout(machine: dict[str, Any]) -> tuple[dict[str, _Node], float, float]:
    depth = _layers(machine)
    columns: dict[int, list[str]] = {}
    for s in machine["states"]:
        columns.setdefault(depth[s], []).append(s)
    rows = max(len(c) for c in columns.values())
    height = PAD * 2 + rows * NODE_H + (rows - 1) * ROW_GAP
    nodes = {}
    for col, states in columns.items():
        block = len(states) * NODE_H + (len(states) - 1) * ROW_GAP
        top = (height - block) / 2
        for i, s in enumerate(states):
            nodes[s] = _Node(s, PAD + col * (NODE_W + COL_GAP), top + i * (NODE_H + ROW_GAP))
    width = PAD * 2 + len(columns) * NODE_W + (len(columns) - 1) * COL_GAP
    return nodes, width, height


def _border_point(node: _Node, tx: float, ty: float) -> tuple[float, float]:
    """Where the line from the node's centre towards (tx, ty) leaves its rectangle."""
    cx, cy = node.x + NODE_W / 2, node.y + NODE_H / 2
    dx, dy = tx - cx, ty - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min((NODE_W / 2) / abs(dx) if dx else math.inf, (NODE_H / 2) / abs(dy) if dy else math.inf)
    return cx + dx * scale, cy + dy * scale


def state_machine_svg(
    machine: dict[str, Any],
    *,
    counts: dict[str, int] | None = None,
    hour: dict[tuple[str, str], int] | None = None,
    day: dict[tuple[str, str], int] | None = None,
    dwell: dict[str, float] | None = None,
    current: str = "",
    path: Sequence[tuple[str, str]] = (),
    state_href: Callable[[str], str] | None = None,
    label: str = "",
) -> SafeString:
    """The machine as an `<svg>`: with `counts`, each state shows its resources; with `hour`/`day`, each edge its
    transitions (last hour / last day); `dwell` the median seconds before leaving; `current` and `path` are
    highlighted; `state_href(state)` makes each state a link."""
    nodes, width, height = _layout(machine)
    taken = set(path)
    parts = [f'<svg class="machine" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
             f'height="{height:.0f}" role="img" aria-label="{escape(label or machine["name"])} state machine">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" '
             'markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
             '<path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>']
    for e in machine["transitions"]:
        a, b = nodes[e["from"]], nodes[e["to"]]
        ax, ay = a.x + NODE_W / 2, a.y + NODE_H / 2
        bx, by = b.x + NODE_W / 2, b.y + NODE_H / 2
        length = math.hypot(bx - ax, by - ay) or 1
        nx, ny = -(by - ay) / length, (bx - ax) / length  # the normal: opposite edges bend to opposite sides
        bend = 26 if abs(bx - ax) < 1 or abs(by - ay) < 1 else 18
        mx, my = (ax + bx) / 2 + nx * bend, (ay + by) / 2 + ny * bend
        sx, sy = _border_point(a, mx, my)
        ex, ey = _border_point(b, mx, my)
        klass = "edge taken" if (e["from"], e["to"]) in taken else "edge"
        n_hour = (hour or {}).get((e["from"], e["to"]), 0)
        n_day = (day or {}).get((e["from"], e["to"]), 0)
        if n_day:
            klass += " active"
        title = f'{e["from"]} → {e["to"]}'
        if hour is not None or day is not None:
            title += f": {n_hour} in the last hour, {n_day} in the last day"
        parts.append(f'<g class="{klass}"><title>{escape(title)}</title>'
                     f'<path d="M{sx:.1f},{sy:.1f} Q{mx:.1f},{my:.1f} {ex:.1f},{ey:.1f}" marker-end="url(#arrow)"/>')
        if hour is not None or day is not None:
            lx, ly = (sx + 2 * mx + ex) / 4, (sy + 2 * my + ey) / 4
            parts.append(f'<text x="{lx:.1f}" y="{ly + 4:.1f}" class="edge-label" text-anchor="middle">'
                         f'{n_hour}/{n_day}</text>')
        parts.append("</g>")
    for s in machine["states"]:
        n = nodes[s]
        klass = "state"
        if s == current:
            klass += " current"
        if s in machine.get("terminal", []):
            klass += " terminal"
        if s == machine["initial"]:
            klass += " initial"
        count = (counts or {}).get(s)
        title = s + (f": {count or 0} resources" if counts is not None else "")
        if dwell and s in dwell:
            title += f", median {duration(dwell[s])} before leaving"
        body = [f'<title>{escape(title)}</title>',
                f'<rect x="{n.x:.1f}" y="{n.y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="8"/>',
                f'<text x="{n.x + NODE_W / 2:.1f}" y="{n.y + 22:.1f}" text-anchor="middle" class="state-name">'
                f'{escape(s)}</text>']
        sub = []
        if counts is not None:
            sub.append(str(count or 0))
        if dwell and s in dwell:
            sub.append(f"med {duration(dwell[s])}")
        if sub:
            body.append(f'<text x="{n.x + NODE_W / 2:.1f}" y="{n.y + 42:.1f}" text-anchor="middle" '
                        f'class="state-sub">{escape(" · ".join(sub))}</text>')
        group = f'<g class="{klass}" data-state="{escape(s)}">{"".join(body)}</g>'
        if state_href is not None:
            group = f'<a href="{escape(state_href(s))}" class="state-link">{group}</a>'
        parts.append(group)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above is escaped


def line_chart_svg(
    title: str,
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    labels: tuple[str, str] = ("", ""),
    fmt: Callable[[float], str] = lambda v: f"{v:.2f}",
    width: int = 320,
    height: int = 140,
) -> SafeString:
    """A small line chart of one or more series over the same buckets (None: no data in that bucket)."""
    pad_l, pad_r, pad_t, pad_b = 44, 8, 22, 22
    values = [v for _, points in series for v in points if v is not None]
    top = max(values) if values else 0.0
    top = top * 1.1 if top > 0 else 1.0
    n = max((len(p) for _, p in series), default=0)
    inner_w, inner_h = width - pad_l - pad_r, height - pad_t - pad_b
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">',
             f'<text x="{pad_l}" y="14" class="chart-title">{escape(title)}</text>',
             f'<line x1="{pad_l}" y1="{pad_t + inner_h}" x2="{width - pad_r}" y2="{pad_t + inner_h}" class="axis"/>',
             f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + inner_h}" class="axis"/>',
             f'<text x="{pad_l - 4}" y="{pad_t + 8}" text-anchor="end" class="tick">{escape(fmt(top))}</text>',
             f'<text x="{pad_l - 4}" y="{pad_t + inner_h}" text-anchor="end" class="tick">{escape(fmt(0.0))}</text>',
             f'<text x="{pad_l}" y="{height - 6}" class="tick">{escape(labels[0])}</text>',
             f'<text x="{width - pad_r}" y="{height - 6}" text-anchor="end" class="tick">{escape(labels[1])}</text>']
    if not values:
        parts.append(f'<text x="{pad_l + inner_w / 2}" y="{pad_t + inner_h / 2}" text-anchor="middle" '
                     f'class="tick">no data in this range</text>')
    for i, (name, points) in enumerate(series):
        coords = []
        for j, v in enumerate(points):
            if v is None:
                continue
            x = pad_l + (inner_w * j / max(1, n - 1))
            y = pad_t + inner_h - inner_h * (v / top)
            coords.append(f"{x:.1f},{y:.1f}")
        if coords:
            parts.append(f'<polyline points="{" ".join(coords)}" class="line line-{i}"><title>{escape(name)}'
                         f'</title></polyline>')
            # a dot per bucket with data: a lone bucket (all runs in the last minutes) has no line to draw
            parts.extend(f'<circle cx="{c.split(",")[0]}" cy="{c.split(",")[1]}" r="2.5" class="point line-{i}"/>'
                         for c in coords)
        if len(series) > 1:
            parts.append(f'<text x="{width - pad_r - 70 * (len(series) - i) + 70}" y="14" text-anchor="end" '
                         f'class="legend line-{i}">{escape(name)}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above is escaped
