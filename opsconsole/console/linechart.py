"""The console's SVG line chart: one or more series over the same time buckets, drawn full width (a responsive
viewBox, sized by CSS) with a time axis (clock-time ticks that fit the window), a y axis with its unit and
gridlines, a legend naming each series (the second series is also dashed: colour is never the only signal), and
an accessible title and description. Every text is escaped; colours come from classes in console.css (the CSP
allows no inline style)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

Series = Sequence[tuple[str, Sequence[float | None]]]


def number(value: float) -> str:
    """A compact label for a figure: 0, 0.05, 1.5, 12.3, 250."""
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """0 and about `count` round steps (1, 2, 2.5 or 5 times a power of ten) up to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    n = max(1, math.ceil(top / step - 1e-9))
    return [round(step * i, 12) for i in range(n + 1)]


def time_ticks(start: datetime, end: datetime, every: timedelta) -> list[tuple[datetime, str]]:
    """Clock times in [start, end] on multiples of `every` counted from local midnight, labelled HH:MM in the
    current time zone (a tick at midnight of a window longer than a few hours also names the day)."""
    local_start = timezone.localtime(start)
    midnight = local_start.replace(hour=0, minute=0, second=0, microsecond=0)
    k = math.ceil((local_start - midnight) / every - 1e-9)
    out: list[tuple[datetime, str]] = []
    t = midnight + every * k
    while t <= end:
        local = timezone.localtime(t)
        label = local.strftime("%a %H:%M") if (local.hour, local.minute) == (0, 0) and every >= timedelta(hours=1) \
            else local.strftime("%H:%M")
        out.append((t, label))
        t += every
    return out


def line_chart_svg(
    title: str,
    series: Series,
    *,
    window: tuple[datetime, datetime] | None = None,
    ticks: Sequence[tuple[datetime, str]] = (),
    unit: str = "",
    description: str = "",
    labels: tuple[str, str] = ("", ""),
    fmt: Callable[[float], str] = number,
    chart_id: str = "chart",
    width: int = 1200,
    height: int = 230,
) -> SafeString:
    """A line chart of `series` ((name, values per bucket), None: no data in that bucket).

    With `window` (start, end), bucket i of n is drawn at the middle of its share of the window and `ticks`
    ((time, label)) are placed on the time axis with a vertical gridline each; without it, the buckets are
    spread evenly and `labels` name the two ends. `unit` labels the y axis and the description; `chart_id`
    makes the title/description ids unique on the page."""
    pad_l, pad_r, pad_t, pad_b = 64, 16, 44, 30
    inner_w, inner_h = width - pad_l - pad_r, height - pad_t - pad_b
    values = [v for _, points in series for v in points if v is not None]
    y_ticks = nice_ticks(max(values) if values else 0.0)
    top = y_ticks[-1] or 1.0
    n = max((len(p) for _, p in series), default=0)
    bottom = pad_t + inner_h
    cid = escape(chart_id)

    def x_of_bucket(j: int) -> float:
        if window is not None:
            return pad_l + inner_w * (j + 0.5) / max(1, n)
        return pad_l + inner_w * j / max(1, n - 1)

    def y_of(v: float) -> float:
        return pad_t + inner_h - inner_h * (v / top)

    names = ", ".join(name for name, _ in series)
    desc = description or (f"{title} ({unit}): {names}" if unit else f"{title}: {names}")
    summary = []
    for name, points in series:
        known = [v for v in points if v is not None]
        if known:
            summary.append(f"{name} peak {fmt(max(known))}, latest {fmt(known[-1])}{' ' + unit if unit else ''}")
        else:
            summary.append(f"{name} no data")
    parts = [f'<svg class="chart chart-wide" viewBox="0 0 {width} {height}" preserveAspectRatio="xMidYMid meet" '
             f'role="img" aria-label="{escape(title)}" aria-labelledby="{cid}-title {cid}-desc" id="{cid}">',
             f'<title id="{cid}-title">{escape(title)}</title>',
             f'<desc id="{cid}-desc">{escape(desc)}; {escape("; ".join(summary))}.</desc>',
             f'<text x="6" y="14" class="chart-title">{escape(title)}</text>']
    if unit:
        parts.append(f'<text x="6" y="{pad_t - 10}" class="tick axis-unit">{escape(unit)}</text>')
    for v in y_ticks:
        y = y_of(v)
        parts.append(f'<line x1="{pad_l}" y1="{y:.1f}" x2="{width - pad_r}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{pad_l - 8}" y="{y + 4:.1f}" text-anchor="end" class="tick y-tick">'
                     f'{escape(fmt(v))}</text>')
    if window is not None:
        start, end = window
        span = max((end - start).total_seconds(), 1e-9)
        for t, label in ticks:
            x = pad_l + inner_w * (t - start).total_seconds() / span
            parts.append(f'<line x1="{x:.1f}" y1="{pad_t}" x2="{x:.1f}" y2="{bottom}" class="grid grid-x"/>')
            parts.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle" class="tick x-tick">'
                         f'{escape(label)}</text>')
    else:
        parts.append(f'<text x="{pad_l}" y="{height - 10}" class="tick x-tick">{escape(labels[0])}</text>')
        parts.append(f'<text x="{width - pad_r}" y="{height - 10}" text-anchor="end" class="tick x-tick">'
                     f'{escape(labels[1])}</text>')
    parts.append(f'<line x1="{pad_l}" y1="{bottom}" x2="{width - pad_r}" y2="{bottom}" class="axis"/>')
    parts.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{bottom}" class="axis"/>')
    if not values:
        parts.append(f'<text x="{pad_l + inner_w / 2}" y="{pad_t + inner_h / 2}" text-anchor="middle" '
                     f'class="tick">no data in this range</text>')
    legend_x = width - pad_r
    for i, (name, _points) in reversed(list(enumerate(series))):
        label_w = 8 * len(name) + 34
        legend_x -= label_w
        parts.append(f'<g class="legend-item"><line x1="{legend_x}" y1="12" x2="{legend_x + 22}" y2="12" '
                     f'class="swatch line line-{i}"/><text x="{legend_x + 26}" y="16" class="legend line-{i}">'
                     f'{escape(name)}</text></g>')
    for i, (name, points) in enumerate(series):
        coords = [(x_of_bucket(j), y_of(v)) for j, v in enumerate(points) if v is not None]
        if not coords:
            continue
        text = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        parts.append(f'<polyline points="{text}" class="line line-{i}"><title>{escape(name)}</title></polyline>')
        # a dot per bucket with data: a lone bucket (all runs in the last minutes) has no line to draw
        parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" class="point line-{i}"/>' for x, y in coords)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text above is escaped
