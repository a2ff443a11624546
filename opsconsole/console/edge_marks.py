"""Where a state machine diagram's edge numbers go, so that none overlaps another or a state, and none is cut by
the drawing's edge.

An edge's label (its transitions in the last hour / day, or a resource's step numbers and time) is as long as
its content, and at the edge's midpoint long labels of neighbouring edges overlapped and the drawing cut them
("…#5,#7,#11 00:0"). The diagram draws a short number in a small disc on the edge instead, and the label in a
legend beside it (`diagrams.state_machine_svg`). `place` puts each disc on its edge's curve at the first of
several points (the middle first, then further out on either side) where it is clear of the states and the
discs already placed, then nudged across the curve if no point along it is; every disc stays inside the drawing.
"""

from __future__ import annotations

from collections.abc import Sequence

from opsconsole.console.graph_layout import NODE_H, NODE_W, EdgeRoute, Point

#: the disc's radius, in SVG user units (it holds a number of up to three digits at 11 px)
RADIUS = 10.0
_GAP = 2.0  # the least space between two discs, or a disc and a state
_ALONG = (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.15, 0.85)
_ACROSS = (0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0)


def _clear(p: Point, placed: Sequence[Point], nodes: Sequence[Point]) -> bool:
    reach = 2 * RADIUS + _GAP
    if any(abs(p[0] - q[0]) < reach and abs(p[1] - q[1]) < reach for q in placed):
        return False
    return not any(abs(p[0] - c[0]) < NODE_W / 2 + RADIUS + _GAP and abs(p[1] - c[1]) < NODE_H / 2 + RADIUS + _GAP
                   for c in nodes)


def _inside(p: Point, width: float, height: float) -> Point:
    margin = RADIUS + 1
    return min(max(p[0], margin), width - margin), min(max(p[1], margin), height - margin)


def place(routes: Sequence[EdgeRoute], nodes: Sequence[Point], width: float, height: float) -> list[Point]:
    """The centre of each route's disc, in the routes' order (see the module)."""
    placed: list[Point] = []
    for route in routes:
        chosen: Point | None = None
        for across in _ACROSS:
            for t in _ALONG:
                x, y = route.point_at(t)
                candidate = _inside((x, y + across * (2 * RADIUS + _GAP)), width, height)
                if _clear(candidate, placed, nodes):
                    chosen = candidate
                    break
            if chosen is not None:
                break
        placed.append(chosen if chosen is not None else _inside(route.point_at(0.5), width, height))
    return placed
