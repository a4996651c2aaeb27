"""A small SVG line chart of the chunking grid (no plotting dependency): one panel per metric,
chunk size on the x axis (evenly spaced), one line per (mode, overlap) series, the best
configuration circled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

__all__ = ["grid_svg"]

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_W, _H = 420, 300  # one panel
_M = {"left": 56, "right": 16, "top": 40, "bottom": 46}


def _series_name(row: Mapping[str, Any]) -> str:
    title = "" if row.get("title_prefix", True) else ", no title"
    if row.get("title_prefix", True) and row.get("count_title"):
        title = ", title counted"
    return f"{row['mode']}, overlap {row['overlap']:g}{title}"


def grid_svg(configs: Sequence[Mapping[str, Any]], metrics: Sequence[str], *, best: int | None = None,
             title: str = "") -> str:
    sizes = sorted({int(r["size"]) for r in configs})
    series: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for i, row in enumerate(configs):
        series.setdefault(_series_name(row), []).append((i, row))
    legend_h = 18 * len(series) + 10
    width, height = _W * len(metrics), _H + legend_h + (24 if title else 0)
    top0 = 24 if title else 0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{escape(title)}</text>')
    for p, metric in enumerate(metrics):
        values = [float(r[metric]) for r in configs if isinstance(r.get(metric), int | float)]
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        pad = max((hi - lo) * 0.1, 0.01)
        lo, hi = max(0.0, lo - pad), min(1.0, hi + pad)
        x0, y0 = p * _W + _M["left"], top0 + _M["top"]
        pw, ph = _W - _M["left"] - _M["right"], _H - _M["top"] - _M["bottom"]

        def x_of(size: int, x0: float = x0, pw: float = pw) -> float:
            return x0 + (sizes.index(size) + 0.5) * pw / len(sizes)

        def y_of(v: float, y0: float = y0, ph: float = ph, lo: float = lo, hi: float = hi) -> float:
            return y0 + ph - (v - lo) / (hi - lo or 1.0) * ph

        out.append(f'<text x="{x0 + pw / 2}" y="{y0 - 12}" text-anchor="middle" font-weight="bold">'
                   f'{escape(metric)}</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        for j in range(5):
            v = lo + (hi - lo) * j / 4
            y = y_of(v)
            out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.3f}</text>')
        for size in sizes:
            out.append(f'<text x="{x_of(size):.1f}" y="{y0 + ph + 18}" text-anchor="middle">{size}</text>')
        out.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 36}" text-anchor="middle">chunk size (tokens)</text>')
        for s, (_name, points) in enumerate(series.items()):
            color = _COLORS[s % len(_COLORS)]
            pts = sorted((int(r["size"]), float(r[metric])) for _, r in points
                         if isinstance(r.get(metric), int | float))
            if len(pts) > 1:
                path = " ".join(f"{x_of(sz):.1f},{y_of(v):.1f}" for sz, v in pts)
                out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
            for i, row in points:
                if not isinstance(row.get(metric), int | float):
                    continue
                cx, cy = x_of(int(row["size"])), y_of(float(row[metric]))
                out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{color}"/>')
                if i == best:
                    out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="8" fill="none" stroke="black"/>')
    ly = top0 + _H
    for s, name in enumerate(series):
        color = _COLORS[s % len(_COLORS)]
        y = ly + 18 * s
        out.append(f'<line x1="{_M["left"]}" x2="{_M["left"] + 24}" y1="{y}" y2="{y}" stroke="{color}" '
                   f'stroke-width="2"/>')
        out.append(f'<text x="{_M["left"] + 30}" y="{y + 4}">{escape(name)}</text>')
    if best is not None:
        out.append(f'<text x="{width - _M["right"]}" y="{ly + 4}" text-anchor="end">'
                   f'○ best: {escape(_series_name(configs[best]))}, size {configs[best]["size"]}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
