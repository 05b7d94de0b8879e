"""A log-log line chart as a standalone SVG file: no plotting library, nothing to install.

``loglog_svg`` draws panels side by side; each panel has its own y unit and several series of
(x, y) points, both axes logarithmic with a grid line per power of ten.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
PANEL_W, PANEL_H = 440, 320
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 40, 95


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]


@dataclass(frozen=True)
class Panel:
    title: str
    x_label: str
    y_label: str
    series: Sequence[Series]


def _decades(values: list[float]) -> tuple[int, int]:
    low = math.floor(math.log10(min(values)))
    high = math.ceil(math.log10(max(values)))
    return low, max(high, low + 1)


def _label(power: int) -> str:
    value = 10.0**power
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _grid_line(x1: object, y1: object, x2: object, y2: object) -> str:
    """A grid line; the coordinates are written as given."""
    return f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#ddd"/>'


def _text(x: object, y: object, anchor: str, text: str) -> str:
    """A label anchored at (x, y); ``text`` is already escaped."""
    return f'<text x="{x}" y="{y}" text-anchor="{anchor}">{text}</text>'


def _panel(panel: Panel, left: int) -> list[str]:
    points = [(x, y) for s in panel.series for x, y in s.points if x > 0 and y > 0]
    out = [
        f'<text x="{left + PANEL_W / 2}" y="22" text-anchor="middle" font-weight="bold">{escape(panel.title)}</text>'
    ]
    if not points:
        return out
    (x0, x1), (y0, y1) = _decades([p[0] for p in points]), _decades([p[1] for p in points])
    width, height = PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM

    def at(x: float, y: float) -> tuple[float, float]:
        fx = (math.log10(x) - x0) / (x1 - x0)
        fy = (math.log10(y) - y0) / (y1 - y0)
        return left + LEFT + fx * width, TOP + (1 - fy) * height

    for power in range(x0, x1 + 1):
        grid_x = f"{at(10.0**power, 10.0**y0)[0]:.1f}"
        out.append(_grid_line(grid_x, TOP, grid_x, TOP + height))
        out.append(_text(grid_x, TOP + height + 16, "middle", _label(power)))
    for power in range(y0, y1 + 1):
        grid_y = at(10.0**x0, 10.0**power)[1]
        out.append(_grid_line(left + LEFT, f"{grid_y:.1f}", left + LEFT + width, f"{grid_y:.1f}"))
        out.append(_text(left + LEFT - 6, f"{grid_y + 4:.1f}", "end", _label(power)))
    out.append(_text(left + LEFT + width / 2, TOP + height + 34, "middle", escape(panel.x_label)))
    out.append(
        f'<text transform="translate({left + 14},{TOP + height / 2}) rotate(-90)" text-anchor="middle">{escape(panel.y_label)}</text>'
    )
    for number, series in enumerate(panel.series):
        colour = COLOURS[number % len(COLOURS)]
        xy = [at(x, y) for x, y in series.points if x > 0 and y > 0]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"><title>{escape(series.label)}</title></polyline>'
        )
        out.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in xy)
        legend_y = TOP + height + 50 + 14 * (number // 2)
        legend_x = left + LEFT + (number % 2) * (width / 2)
        out.append(
            f'<rect x="{legend_x}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>'
        )
        out.append(f'<text x="{legend_x + 14}" y="{legend_y}">{escape(series.label)}</text>')
    return out


def loglog_svg(panels: Sequence[Panel], *, title: str = "") -> str:
    """The SVG document of ``panels`` side by side under ``title``."""
    width, height = PANEL_W * len(panels), PANEL_H + (24 if title else 0)
    body: list[str] = []
    for number, panel in enumerate(panels):
        body.extend(_panel(panel, number * PANEL_W))
    shift = 24 if title else 0
    heading = f'<text x="10" y="18" font-weight="bold">{escape(title)}</text>' if title else ""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
        f'<rect width="100%" height="100%" fill="white"/>{heading}'
        f'<g transform="translate(0,{shift})">{"".join(body)}</g></svg>\n'
    )
