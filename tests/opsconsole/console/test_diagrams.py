"""The console's SVG line chart: a line through the buckets with data, a dot on each, text escaped."""

from __future__ import annotations

import re

from opsconsole.console.linechart import line_chart_svg


def test_a_single_bucket_with_data_still_shows_as_a_dot_and_gaps_are_skipped() -> None:
    svg = line_chart_svg("Reconcile time", [("p50", [None, None, 0.2]), ("p99", [0.1, None, 0.4])])
    assert len(re.findall(r"<circle [^>]*class=\"point line-0\"", svg)) == 1  # one bucket: no line, one dot
    assert len(re.findall(r"<circle [^>]*class=\"point line-1\"", svg)) == 2
    (p99_line,) = re.findall(r'<polyline points="([^"]+)" class="line line-1"', svg)
    assert len(p99_line.split()) == 2  # the empty middle bucket has no point
    assert "no data in this range" not in svg


def test_no_data_says_so_and_titles_are_escaped() -> None:
    svg = line_chart_svg("<b>rate</b>", [("a&b", [None, None])])
    assert "no data in this range" in svg and "<circle" not in svg and "<polyline" not in svg
    assert "&lt;b&gt;rate&lt;/b&gt;" in svg and "<b>" not in svg
