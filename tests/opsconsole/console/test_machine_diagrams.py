"""The state machine diagram: laid out by Graphviz left to right (the initial state leftmost), the two directions
of an edge pair apart with an arrowhead each, edges none took faint and unlabelled, counts and dwell on the
states, states coloured by their semantic class, a resource's path numbered with its times, every text escaped,
and the simple layout when `dot` is missing."""

from __future__ import annotations

import re
import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from opsconsole.console import graph_layout
from opsconsole.console.diagrams import state_machine_svg
from reconcilers.kinds.memcached import MACHINE

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
MACHINE_DICT = MACHINE.as_dict() | {"classes": {
    "Pending": "progressing", "Running": "ready", "Degraded": "warning", "Failed": "failed",
    "RollingBack": "warning", "Terminating": "progressing", "Deleted": "terminal"}}


@pytest.fixture(autouse=True)
def fresh_layouts():
    graph_layout.layout_cache_clear()
    yield
    graph_layout.layout_cache_clear()


def _node_x(svg: str) -> dict[str, float]:
    """Each state's box left edge, by its data-state."""
    return {m[0]: float(m[1]) for m in re.findall(r'data-state="([^"]+)"[^>]*><title>[^<]*</title><rect x="([\d.]+)"',
                                                  svg)}


def _edge(svg: str, a: str, b: str) -> str:
    match = re.search(rf'<g class="[^"]*" data-edge="{a}→{b}">.*?</g>', svg)
    assert match, f"no edge {a} → {b}"
    return match.group(0)


@needs_dot
def test_dot_lays_the_machine_out_left_to_right_with_both_directions_of_a_pair_apart() -> None:
    layout = graph_layout.machine_layout(MACHINE_DICT)
    assert layout.engine == "dot"
    xs = {s: p[0] for s, p in layout.nodes.items()}
    assert xs["Pending"] == min(xs.values())  # the initial state leftmost
    assert xs["Deleted"] == max(xs.values())
    there, back = layout.edges[("Pending", "Running")], layout.edges[("Running", "Pending")]
    assert there.d() != back.d() and there.tip is not None and back.tip is not None
    assert there.tip[0] > back.tip[0]  # each arrow points at its own end
    assert graph_layout.machine_layout(MACHINE_DICT) is layout  # memoised per structure


@needs_dot
def test_edges_none_took_are_faint_and_unlabelled_and_busy_ones_say_their_counts() -> None:
    svg = state_machine_svg(MACHINE_DICT, counts={"Running": 3}, hour={("Pending", "Running"): 2},
                            day={("Pending", "Running"): 5}, label="Memcached")
    assert 'data-layout="dot"' in svg
    quiet = _edge(svg, "Running", "Pending")
    assert 'class="edge faint"' in quiet and "marker-end=\"url(#sm-Memcached-faint)\"" in quiet
    assert "<title>Running → Pending: 0 in the last hour, 0 in the last day</title>" in quiet
    assert 'class="edge active"' in _edge(svg, "Pending", "Running")
    labels = re.findall(r'<tr class="edge-label" data-edge="([^"]*)"><th scope="row">(\d+)</th><td>[^<]*</td>'
                        r'<td>([^<]*)</td>', svg)
    assert labels == [("Pending→Running", "1", "2/5")]  # only where something moved, numbered in the legend
    assert re.findall(r'<g class="edge-mark" data-edge="([^"]*)" data-n="(\d+)">', svg) == [("Pending→Running", "1")]
    assert svg.count('<marker id="sm-Memcached-') == 3


@needs_dot
def test_states_show_their_resources_now_their_dwell_and_their_semantic_class() -> None:
    svg = state_machine_svg(MACHINE_DICT, counts={"Running": 3, "Failed": 1},
                            dwell_now={"Running": {"n": 3, "median": 90.0, "max": 7200.0}},
                            dwell={"Running": 600.0}, state_href=lambda s: f"/r?phase={s}&x=<y>")
    running = re.search(r'<g class="([^"]+)" data-state="Running" data-class="ready">(.*?)</g>', svg)
    assert running and "st-ok" in running.group(1)
    assert ">3 now<" in running.group(2) and ">1 min / 2 h<" in running.group(2)
    assert "there for a median 1 min, the longest 2 h, median 10 min before leaving" in running.group(2)
    assert re.search(r'class="state st-bad cls-failed[^"]*" data-state="Failed"', svg)
    assert re.search(r'class="state st-off cls-terminal terminal" data-state="Deleted"', svg)
    assert 'href="/r?phase=Running&amp;x=&lt;y&gt;"' in svg


@needs_dot
def test_a_resources_path_is_numbered_with_its_times_and_its_current_state_marked() -> None:
    now = timezone.now()
    steps = [(1, "", "Pending", now - timedelta(hours=1)), (2, "Pending", "Running", now - timedelta(minutes=50)),
             (3, "Running", "Degraded", now - timedelta(minutes=20)),
             (4, "Degraded", "Running", now - timedelta(minutes=10))]
    svg = state_machine_svg(MACHINE_DICT, current="Running", steps=steps, now=now, label="<m>")
    assert 'aria-label="&lt;m&gt; state machine"' in svg
    taken = _edge(svg, "Pending", "Running")
    assert 'class="edge taken"' in taken and "#2 at " in taken
    assert 'class="edge faint"' in _edge(svg, "Running", "Pending")
    labels = re.findall(r'<tr class="edge-label taken"[^>]*><th scope="row">\d+</th><td>[^<]*</td><td>([^<]*)</td>',
                        svg)
    assert sorted(label.split()[0] for label in labels) == ["#2", "#3", "#4"]
    assert svg.count('<g class="edge-mark taken"') == 3 and "steps (the latest at)" in svg
    running = re.search(r'<g class="([^"]+)" data-state="Running"[^>]*>(.*?)</g>', svg)
    assert running and "current" in running.group(1) and "visited" in running.group(1)
    assert ">2× · 40 min<" in running.group(2)  # 50 - 20 = 30 min, then the last 10 min until now
    assert "(it is there now)" in running.group(2)


def test_without_dot_the_simple_layout_draws_the_same_diagram(settings, caplog) -> None:
    settings.OPSCONSOLE_DOT_PATH = "/nonexistent/dot"
    with caplog.at_level("WARNING", logger="opsconsole.console.graph_layout"):
        svg = state_machine_svg(MACHINE_DICT, counts={"Running": 1}, day={("Pending", "Running"): 1}, label="M")
        state_machine_svg(MACHINE_DICT, label="M2")
        graph_layout.machine_layout(MACHINE.as_dict() | {"initial": "Pending"})
    assert 'data-layout="fallback"' in svg
    assert len([r for r in caplog.records if "not installed" in r.getMessage()]) == 1  # logged once
    xs = _node_x(svg)
    assert set(xs) == set(MACHINE.states) and xs["Pending"] == min(xs.values())
    assert 'class="edge faint"' in _edge(svg, "Running", "Pending")
    assert 'class="edge active"' in _edge(svg, "Pending", "Running")
