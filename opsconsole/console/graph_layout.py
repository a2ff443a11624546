"""Where a state machine's states and edges go in its diagram: Graphviz's `dot` lays the machine out
left to right (`dot -Tjson`: node centres and each edge's B-spline, both directions of a pair apart), and the
layout is memoised per machine structure (states, initial state, transitions, terminal states), bounded. The
`dot` binary is the setting OPSCONSOLE_DOT_PATH ("dot" on the PATH by default); without it (a fresh machine)
a simple layered layout by breadth-first distance from the initial state stands in, and that is logged once.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)

#: a state's box, in SVG user units (Graphviz points)
NODE_W, NODE_H = 150.0, 70.0
PAD = 10.0
_COL_GAP, _ROW_GAP = 80.0, 34.0
_DOT_TIMEOUT = 10.0
_warned: set[str] = set()
_warned_lock = threading.Lock()

Point = tuple[float, float]


@dataclass(frozen=True)
class EdgeRoute:
    """One edge's curve: from `start` through cubic Bézier segments (`curves`, three points each), then a
    straight piece to `tip` (where the arrowhead points) when Graphviz left room for one."""

    start: Point
    curves: tuple[Point, ...]
    tip: Point | None = None

    def d(self) -> str:
        """The SVG path data."""
        out = [f"M{self.start[0]:.1f},{self.start[1]:.1f}"]
        for i in range(0, len(self.curves) - 2, 3):
            (x1, y1), (x2, y2), (x3, y3) = self.curves[i:i + 3]
            out.append(f"C{x1:.1f},{y1:.1f} {x2:.1f},{y2:.1f} {x3:.1f},{y3:.1f}")
        if self.tip is not None:
            out.append(f"L{self.tip[0]:.1f},{self.tip[1]:.1f}")
        return " ".join(out)

    def midpoint(self) -> Point:
        """The point halfway along the spline's segments (where a label goes)."""
        return self.point_at(0.5)

    def point_at(self, fraction: float) -> Point:
        """The point `fraction` (0 to 1) of the way along the spline's segments."""
        segments = len(self.curves) // 3
        if segments == 0:
            end = self.tip or self.start
            return (self.start[0] + (end[0] - self.start[0]) * fraction,
                    self.start[1] + (end[1] - self.start[1]) * fraction)
        at = min(max(fraction, 0.0), 1.0) * segments
        k = min(int(at), segments - 1)
        t = at - k
        p0 = self.start if k == 0 else self.curves[3 * k - 1]
        p1, p2, p3 = self.curves[3 * k:3 * k + 3]
        u = 1 - t
        return (u ** 3 * p0[0] + 3 * u * u * t * p1[0] + 3 * u * t * t * p2[0] + t ** 3 * p3[0],
                u ** 3 * p0[1] + 3 * u * u * t * p1[1] + 3 * u * t * t * p2[1] + t ** 3 * p3[1])


@dataclass(frozen=True)
class Layout:
    """Node centres, edge routes (by (from, to)) and the drawing's size; `engine` is "dot" or "fallback"."""

    width: float
    height: float
    nodes: dict[str, Point]
    edges: dict[tuple[str, str], EdgeRoute]
    engine: str


def machine_layout(machine: dict[str, Any]) -> Layout:
    """The layout of `machine` (`StateMachine.as_dict()`): by `dot` when it runs, else the fallback."""
    states = tuple(machine["states"])
    edges = tuple((e["from"], e["to"]) for e in machine["transitions"])
    terminal = tuple(machine.get("terminal", ()))
    dot = str(getattr(settings, "OPSCONSOLE_DOT_PATH", "dot") or "dot")
    return _layout(states, machine["initial"], edges, terminal, dot)


def layout_cache_clear() -> None:
    """Forget the memoised layouts (tests)."""
    _layout.cache_clear()
    with _warned_lock:
        _warned.clear()


@functools.lru_cache(maxsize=64)
def _layout(states: tuple[str, ...], initial: str, edges: tuple[tuple[str, str], ...],
            terminal: tuple[str, ...], dot: str) -> Layout:
    binary = shutil.which(dot)
    if binary is not None:
        try:
            return _dot_layout(binary, states, initial, edges, terminal)
        except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
            _warn_once(dot, f"Graphviz {dot!r} failed ({type(exc).__name__}: {exc}); the diagrams use the simple "
                            "layout")
    else:
        _warn_once(dot, f"Graphviz {dot!r} is not installed; the state machine diagrams use the simple layout "
                        "(apt-get install graphviz)")
    return _fallback_layout(states, initial, edges)


def _warn_once(dot: str, message: str) -> None:
    with _warned_lock:
        if dot in _warned:
            return
        _warned.add(dot)
    log.warning("%s", message)


def _dot_source(states: tuple[str, ...], initial: str, edges: tuple[tuple[str, str], ...],
                terminal: tuple[str, ...]) -> str:
    ids = {s: f"n{i}" for i, s in enumerate(states)}  # state names never reach dot: no quoting to get wrong
    lines = ["digraph machine {",
             "graph [rankdir=LR, nodesep=0.45, ranksep=0.85, splines=true, pad=0];",
             f"node [shape=box, fixedsize=true, width={NODE_W / 72:.3f}, height={NODE_H / 72:.3f}, label=\"\"];",
             "edge [arrowsize=0.9];",
             f"{{rank=min; {ids[initial]};}}"]
    sinks = [ids[s] for s in terminal if s in ids and s != initial]
    if sinks:
        lines.append(f"{{rank=max; {'; '.join(sinks)};}}")
    lines += [f"{ids[s]};" for s in states]
    lines += [f"{ids[a]} -> {ids[b]};" for a, b in edges]
    lines.append("}")
    return "\n".join(lines)


def _point(text: str) -> Point:
    x, y = text.split(",")[:2]
    return float(x), float(y)


def _dot_layout(binary: str, states: tuple[str, ...], initial: str, edges: tuple[tuple[str, str], ...],
                terminal: tuple[str, ...]) -> Layout:
    done = subprocess.run([binary, "-Tjson"], input=_dot_source(states, initial, edges, terminal), text=True,
                          capture_output=True, timeout=_DOT_TIMEOUT, check=True)
    graph = json.loads(done.stdout)
    x0, y0, x1, y1 = (float(v) for v in graph["bb"].split(","))

    def flip(p: Point) -> Point:  # Graphviz's y grows upwards; SVG's downwards
        return p[0] - x0 + PAD, y1 - p[1] + PAD

    by_gvid: dict[int, str] = {}
    nodes: dict[str, Point] = {}
    for obj in graph.get("objects", []):
        if "pos" not in obj or not str(obj.get("name", "")).startswith("n"):  # the rank subgraphs
            continue
        index = int(obj["name"][1:])
        by_gvid[int(obj["_gvid"])] = states[index]
        nodes[states[index]] = flip(_point(obj["pos"]))
    routes: dict[tuple[str, str], EdgeRoute] = {}
    for edge in graph.get("edges", []):
        tip: Point | None = None
        points: list[Point] = []
        for token in edge["pos"].split():
            if token.startswith("e,"):
                tip = flip(_point(token[2:]))
            elif token.startswith("s,"):
                continue
            else:
                points.append(flip(_point(token)))
        if not points:
            raise ValueError("an edge without a route")
        routes[(by_gvid[int(edge["tail"])], by_gvid[int(edge["head"])])] = EdgeRoute(points[0], tuple(points[1:]),
                                                                                      tip)
    if set(nodes) != set(states):
        raise ValueError("dot did not place every state")
    return Layout(x1 - x0 + 2 * PAD, y1 - y0 + 2 * PAD, nodes, routes, "dot")


def _fallback_layout(states: tuple[str, ...], initial: str, edges: tuple[tuple[str, str], ...]) -> Layout:
    """Columns by breadth-first distance from the initial state; each edge a curve bent to its left, so the two
    directions of a pair take opposite sides."""
    succ: dict[str, list[str]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    depth = {initial: 0}
    frontier = [initial]
    while frontier:
        nxt = []
        for s in frontier:
            for t in succ.get(s, []):
                if t not in depth:
                    depth[t] = depth[s] + 1
                    nxt.append(t)
        frontier = nxt
    columns: dict[int, list[str]] = {}
    for s in states:
        columns.setdefault(depth.get(s, 0), []).append(s)
    rows = max(len(c) for c in columns.values())
    height = PAD * 2 + rows * NODE_H + (rows - 1) * _ROW_GAP
    nodes: dict[str, Point] = {}
    for col, members in columns.items():
        block = len(members) * NODE_H + (len(members) - 1) * _ROW_GAP
        top = (height - block) / 2
        for i, s in enumerate(members):
            nodes[s] = (PAD + col * (NODE_W + _COL_GAP) + NODE_W / 2, top + i * (NODE_H + _ROW_GAP) + NODE_H / 2)
    width = PAD * 2 + len(columns) * NODE_W + (len(columns) - 1) * _COL_GAP
    routes = {}
    for a, b in edges:
        (ax, ay), (bx, by) = nodes[a], nodes[b]
        length = math.hypot(bx - ax, by - ay) or 1
        nx, ny = -(by - ay) / length, (bx - ax) / length
        bend = 26 if abs(bx - ax) < 1 or abs(by - ay) < 1 else 18
        mx, my = (ax + bx) / 2 + nx * bend, (ay + by) / 2 + ny * bend
        sx, sy = _border_point(nodes[a], mx, my)
        ex, ey = _border_point(nodes[b], mx, my)
        # the quadratic curve through (mx, my) as a cubic one
        c1 = (sx + 2 / 3 * (mx - sx), sy + 2 / 3 * (my - sy))
        c2 = (ex + 2 / 3 * (mx - ex), ey + 2 / 3 * (my - ey))
        routes[(a, b)] = EdgeRoute((sx, sy), (c1, c2, (ex, ey)))
    return Layout(width, height, nodes, routes, "fallback")


def _border_point(centre: Point, tx: float, ty: float) -> Point:
    """Where the line from a node's centre towards (tx, ty) leaves its box."""
    cx, cy = centre
    dx, dy = tx - cx, ty - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min((NODE_W / 2) / abs(dx) if dx else math.inf, (NODE_H / 2) / abs(dy) if dy else math.inf)
    return cx + dx * scale, cy + dy * scale
