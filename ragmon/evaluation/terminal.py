"""Terminal output of ``ragmon eval``: a progress bar on stderr and the end-of-run summary.

Standard library only. :class:`Progress` redraws one line in place (``\\r``) when its stream is a
terminal, at most every ``min_interval_s``; when it is not (CI logs, pipes) it prints plain lines
instead, one per ``log_every`` share of the work and one at the end, so a log never fills with
carriage returns. It is thread-safe: the runner may call :meth:`Progress.advance` from worker
threads. :func:`render_summary` is pure and returns the text to print on stdout.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, TextIO

from .markdown import (
    MISS_ORDER,
    VERDICT_ORDER,
    format_delta,
    format_interval,
    format_observed,
    format_p,
    format_seconds,
    format_value,
)

BAR_WIDTH: Final = 28
DEFAULT_WORST: Final = 5
_CLEAR_EOL: Final = "\x1b[K"


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class Progress:
    """done/total with rate and ETA on ``stream`` (default stderr).

    Use as a context manager (``with Progress(n) as p: ... p.advance()``) or call :meth:`close`;
    ``failed`` counts rows that ended with a problem and is shown beside the total.
    """

    def __init__(
        self,
        total: int,
        *,
        label: str = "eval",
        stream: TextIO | None = None,
        tty: bool | None = None,
        min_interval_s: float = 0.1,
        log_every: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = max(0, int(total))
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = _isatty(self.stream) if tty is None else tty
        self.min_interval_s = min_interval_s
        self.log_every = log_every
        self.done = 0
        self.failed = 0
        self._clock = clock
        self._start = clock()
        self._last_draw = float("-inf")
        self._next_log = log_every
        self._closed = False
        self._lock = threading.Lock()

    def __enter__(self) -> Progress:
        self._draw(force=True)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def advance(self, n: int = 1, *, failed: bool = False) -> None:
        """Count ``n`` more rows done (``failed``: they ended with a problem)."""
        with self._lock:
            self.done = min(self.total, self.done + n) if self.total else self.done + n
            self.failed += n if failed else 0
            self._draw()

    def close(self) -> None:
        """Draw the final state and end the line; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._draw(force=True, final=True)

    def line(self) -> str:
        """The progress text without any terminal control characters."""
        elapsed = max(self._clock() - self._start, 1e-9)
        rate = self.done / elapsed
        share = self.done / self.total if self.total else 1.0
        parts = [f"{self.label}: {self.done}/{self.total}"]
        if self.tty:
            filled = round(BAR_WIDTH * share)
            parts.insert(0, "[" + "#" * filled + "-" * (BAR_WIDTH - filled) + "]")
        parts.append(f"({share:.0%})")
        if self.failed:
            parts.append(f"{self.failed} with problems")
        parts.append(f"{rate:.1f} q/s")
        if self.done < self.total and rate > 0:
            parts.append(f"ETA {format_duration((self.total - self.done) / rate)}")
        elif self.done >= self.total:
            parts.append(f"in {format_duration(elapsed)}")
        return " ".join(parts)

    def _draw(self, force: bool = False, final: bool = False) -> None:
        if self.tty:
            now = self._clock()
            if not force and now - self._last_draw < self.min_interval_s and self.done < self.total:
                return
            self._last_draw = now
            self._write("\r" + self.line() + _CLEAR_EOL + ("\n" if final else ""))
            return
        if final:
            self._write(self.line() + "\n")
            return
        share = self.done / self.total if self.total else 1.0
        if self.done >= self.total or share + 1e-9 < self._next_log:
            return  # the last line comes from close()
        while self._next_log <= share + 1e-9:
            self._next_log += self.log_every
        self._write(self.line() + "\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream never stops an evaluation
            pass


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


# --- summary ---------------------------------------------------------------------------------
_COLORS: Final = {"green": "\x1b[32m", "red": "\x1b[31m", "yellow": "\x1b[33m", "bold": "\x1b[1m"}
_RESET: Final = "\x1b[0m"


def _paint(text: str, color: str, enabled: bool) -> str:
    return f"{_COLORS[color]}{text}{_RESET}" if enabled else text


def _one_line(text: Any, limit: int = 100) -> str:
    value = " ".join(str(text or "").split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _gate_lines(report: Mapping[str, Any], color: bool) -> list[str]:
    gate = report.get("gate") or {}
    rules = gate.get("rules") or []
    failed = [r for r in rules if r.get("status") == "failed"]
    warned = [r for r in rules if r.get("status") == "warned"]
    verdict = _paint("PASSED", "green", color) if gate.get("passed") else _paint("FAILED", "red", color)
    lines = [f"Gate: {verdict} ({len(failed)} failed, {len(warned)} warned, {len(rules)} rules)"]
    for tag, group, paint in (("FAIL", failed, "red"), ("WARN", warned, "yellow")):
        for rule in group:
            lines.append(f"  {_paint(tag, paint, color)} {rule.get('rule')}: {_one_line(rule.get('message'), 160)}")
    return lines


def _metric_lines(report: Mapping[str, Any]) -> list[str]:
    metrics: Mapping[str, Any] = report.get("metrics") or {}
    if not metrics:
        return []
    deltas: Mapping[str, Any] = (report.get("baseline") or {}).get("deltas") or {}
    width = max(len("metric"), *(len(str(name)) for name in metrics))
    header = f"  {'metric':<{width}}  {'mean':>6}  {'95% CI':<16}"
    if deltas:
        header += f"  {'Δ':>7}  {'p':>6}"
    lines = ["", header]
    for name, value in metrics.items():
        line = f"  {name:<{width}}  {format_value(value.get('mean')):>6}  {format_interval(value.get('ci95')):<16}"
        if deltas:
            d = deltas.get(name) or {}
            line += f"  {format_delta(d.get('delta')):>7}  {format_p(d.get('p_value')):>6}"
        lines.append(line.rstrip())
    return lines


def _breakdown_lines(report: Mapping[str, Any]) -> list[str]:
    lines = []
    lat = report.get("latency") or {}
    if any(v is not None for v in lat.values()):
        lines.append(
            f"Latency: retrieval P50 {format_seconds(lat.get('retrieval_p50_s'))}, "
            f"P95 {format_seconds(lat.get('retrieval_p95_s'))}; pipeline P50 "
            f"{format_seconds(lat.get('pipeline_p50_s'))}, P95 {format_seconds(lat.get('pipeline_p95_s'))}"
        )
    types = []
    for qtype, section in (report.get("by_question_type") or {}).items():
        primary = section.get("primary_metric")
        value = ((section.get("metrics") or {}).get(primary) or {}).get("mean") if primary else None
        shown = f" ({primary} {format_value(value)})" if primary else ""
        types.append(f"{qtype} {section.get('questions', 0)}{shown}")
    if types:
        lines.append("By type: " + ", ".join(types))
    for title, counts, order in (
        ("Verdicts", report.get("verdicts") or {}, VERDICT_ORDER),
        ("Multi-hop misses", report.get("multi_hop_misses") or {}, MISS_ORDER),
    ):
        if counts:
            keys = [k for k in order if k in counts] + [k for k in counts if k not in order]
            lines.append(f"{title}: " + ", ".join(f"{k} {counts[k]}" for k in keys))
    return lines


def render_summary(report: Mapping[str, Any], *, color: bool = False, worst: int = DEFAULT_WORST) -> str:
    """The end-of-run summary: run facts, gate verdict and failed/warned rules, metric table (with
    Δ and p against the baseline), latency, per-type primary metrics, verdicts, multi-hop misses,
    the ``worst`` worst questions and the problem counts. ``color`` adds ANSI colours."""
    title = (
        f"ragmon eval — {report.get('evalset_name') or report.get('evalset') or '?'}: "
        f"{report.get('questions', 0)} questions, judge {report.get('judge') or 'none'}"
    )
    lines = [_paint(title, "bold", color)]
    baseline = report.get("baseline")
    if baseline:
        lines.append(f"Baseline: {baseline.get('path')} ({baseline.get('shared_questions', 0)} shared questions)")
    lines += _gate_lines(report, color)
    lines += _metric_lines(report)
    lines.append("")
    lines += _breakdown_lines(report)
    items = list(report.get("worst") or [])[: max(0, worst)]
    if items:
        lines.append("Worst questions:")
        for item in items:
            lines.append(
                f"  {item.get('id')} [{item.get('verdict') or '—'}] {_one_line(item.get('question'), 70)}"
                f" — {_one_line(item.get('why'), 100)}"
            )
            for c in (item.get("contradicted_claims") or [])[:2]:
                lines.append(f"      contradicted: {_one_line(c.get('claim'), 70)} ({_one_line(c.get('reason'), 40)};"
                             f" source: {_one_line(c.get('evidence'), 70)})")
    problems = report.get("problems") or {}
    if problems.get("count"):
        reasons = ", ".join(f"{k} {v}" for k, v in sorted((problems.get("by_reason") or {}).items()))
        lines.append(_paint(f"Problems: {problems['count']} rows ({reasons})", "yellow", color))
    rules = (report.get("gate") or {}).get("rules") or []
    skipped = [r for r in rules if r.get("status") == "skipped"]
    for rule in skipped:
        lines.append(f"Skipped rule {rule.get('rule')}: {_one_line(rule.get('message'), 120)}")
    observed = [r for r in rules if r.get("kind") == "absolute" and r.get("status") == "passed"]
    if observed:
        lines.append(
            "Passed: "
            + ", ".join(f"{r.get('rule')} ({format_observed(str(r.get('metric') or ''), r.get('observed'))})"
                        for r in observed)
        )
    return "\n".join(lines).rstrip() + "\n"
