"""The evaluation report as Markdown, for a CI job summary or a pull-request comment. Pure, no I/O.

Reads the JSON report dict (schema ``ragmon.eval/1``) and writes, in order of what a reviewer
needs first: the gate verdict with the rules that failed or warned, every gate rule, the metrics table (with the
delta against the baseline when there is one), the primary metric per question type, latency,
the retrieval-vs-generation verdicts, the multi-hop miss classes, the worst questions and the
row problems. User text (questions, messages, ids) is escaped so it cannot break a table or
inject HTML; the whole text is capped below GitHub's 65,536-character comment limit.

The small number formatters here are shared with :mod:`ragmon.evaluation.terminal`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

GITHUB_COMMENT_LIMIT: Final = 65_536
# Room under the limit for a marker or heading that a CI step may add around the summary.
DEFAULT_MAX_CHARS: Final = GITHUB_COMMENT_LIMIT - 1_536
DEFAULT_WORST: Final = 10
MAX_PROBLEM_ITEMS: Final = 20
MAX_CELL_CHARS: Final = 200

STATUS_ICONS: Final = {"passed": "✅", "failed": "❌", "warned": "⚠️", "skipped": "⏭️"}
VERDICT_ORDER: Final = ("ok", "retrieval_failure", "generation_failure", "both")
MISS_ORDER: Final = ("hop1_miss", "hop2_miss", "both_miss")

Report = Mapping[str, Any]


# --- number formatting (shared with terminal.py) ------------------------------------------------
def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def format_value(value: Any, digits: int = 3) -> str:
    """A score or other number with ``digits`` decimals; ``—`` when missing or not finite."""
    number = _finite(value)
    return "—" if number is None else f"{number:.{digits}f}"


def format_delta(value: Any, digits: int = 3) -> str:
    """A signed difference: ``+0.012`` / ``-0.034``; ``—`` when missing."""
    number = _finite(value)
    return "—" if number is None else f"{number:+.{digits}f}"


def format_interval(ci95: Any, digits: int = 3, signed: bool = False) -> str:
    """``[lo, hi]``, or ``—`` when there is no interval."""
    if not isinstance(ci95, Sequence) or isinstance(ci95, str) or len(ci95) != 2:
        return "—"
    lo, hi = _finite(ci95[0]), _finite(ci95[1])
    if lo is None or hi is None:
        return "—"
    fmt = format_delta if signed else format_value
    return f"[{fmt(lo, digits)}, {fmt(hi, digits)}]"


def format_p(value: Any) -> str:
    """A p-value: ``0.031``, ``<0.001``, or ``—``."""
    number = _finite(value)
    if number is None:
        return "—"
    return "<0.001" if number < 0.001 else f"{number:.3f}"


def format_seconds(value: Any) -> str:
    """A latency: ``45 ms`` below a second, ``1.25 s`` above; ``—`` when missing."""
    number = _finite(value)
    if number is None:
        return "—"
    return f"{number * 1000:.0f} ms" if number < 1 else f"{number:.2f} s"


def format_observed(metric: str, value: Any) -> str:
    """A gate rule's observed/baseline value: seconds for latency metrics, else a plain number."""
    if metric.endswith(("_s", "_seconds")):
        return format_seconds(value)
    number = _finite(value)
    return "—" if number is None else f"{number:.4g}"


# --- escaping ----------------------------------------------------------------------------------
_NEWLINES = re.compile(r"\s*[\r\n]+\s*")


def escape_cell(text: Any, limit: int = MAX_CELL_CHARS) -> str:
    """User text made safe for one Markdown table cell (or one list line): newlines become
    spaces, pipes and backslashes are escaped, ``<``/``>``/``&`` become entities, backticks
    are neutralised, and the text is cut to ``limit`` characters with an ellipsis."""
    value = "" if text is None else str(text)
    value = _NEWLINES.sub(" ", value).strip()
    if len(value) > limit:
        value = value[: limit - 1].rstrip() + "…"
    value = value.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(text: Any, limit: int = MAX_CELL_CHARS) -> str:
    """User text as an inline code span in a table cell: code spans show ``<``/``&`` literally (no
    entities needed), so only newlines, backticks and pipes (which GitHub splits cells on even
    inside code) are handled."""
    value = _NEWLINES.sub(" ", "" if text is None else str(text)).strip()
    if len(value) > limit:
        value = value[: limit - 1].rstrip() + "…"
    value = value.replace("`", "'").replace("|", "\\|")
    return f"`{value}`" if value else "—"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> list[str]:
    """A GitHub table; ``align`` is one character per column (l, r), default left."""
    aligns = [":---" if (align[i:i + 1] or "l") == "l" else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# --- sections ----------------------------------------------------------------------------------
def _header(report: Report) -> list[str]:
    gate = report.get("gate") or {}
    passed = bool(gate.get("passed"))
    rules = gate.get("rules") or []
    failed = [r for r in rules if r.get("status") == "failed"]
    warned = [r for r in rules if r.get("status") == "warned"]
    icon, verdict = ("✅", "passed") if passed else ("❌", "failed")
    counts = f"{len(failed)} failed, {len(warned)} warned, {len(rules)} rules"
    lines = [f"## {icon} ragmon eval: gate {verdict} ({counts})", ""]
    facts = [
        f"eval set **{escape_cell(report.get('evalset_name') or report.get('evalset') or '?')}**",
        f"{report.get('questions', 0)} questions",
        f"judge {code(report.get('judge') or 'none')}",
    ]
    if report.get("app"):
        facts.append(f"app {code(report['app'])}")
    baseline = report.get("baseline")
    if baseline:
        facts.append(
            f"baseline {code(baseline.get('path'))} ({baseline.get('shared_questions', 0)} shared questions)"
        )
    version = escape_cell(report.get("ragmon_version", ""))
    facts.append(f"{escape_cell(report.get('created_at', ''))} · ragmon {version}")
    lines += [" · ".join(facts), ""]
    for rule in failed + warned:
        lines.append(
            f"- {STATUS_ICONS[rule['status']]} **{escape_cell(rule.get('rule'))}**: {escape_cell(rule.get('message'))}"
        )
    if failed or warned:
        lines.append("")
    return lines


def _gate_table(report: Report) -> list[str]:
    rules = (report.get("gate") or {}).get("rules") or []
    if not rules:
        return []
    rows = []
    for rule in rules:
        metric = str(rule.get("metric") or "")
        rows.append(
            [
                f"{STATUS_ICONS.get(rule.get('status', ''), '')} {escape_cell(rule.get('status'))}",
                code(rule.get('rule')),
                escape_cell(rule.get("severity")),
                format_observed(metric, rule.get("observed")),
                format_observed(metric, rule.get("baseline")),
                format_delta(rule.get("delta")),
                format_interval(rule.get("ci95"), signed=rule.get("kind") == "drop"),
                format_p(rule.get("p_value")),
            ]
        )
    header = ["status", "rule", "severity", "observed", "baseline", "Δ", "95% CI", "p"]
    return ["### Gate rules", "", *_table(header, rows, "lllrrrrr"), ""]


def _metrics_table(report: Report) -> list[str]:
    metrics: Mapping[str, Any] = report.get("metrics") or {}
    if not metrics:
        return []
    baseline = report.get("baseline") or {}
    deltas: Mapping[str, Any] = baseline.get("deltas") or {}
    header = ["metric", "mean", "95% CI", "n"]
    if baseline:
        header += ["baseline", "Δ", "Δ 95% CI", "p"]
    rows = []
    for name, value in metrics.items():
        row = [
            code(name),
            format_value(value.get("mean")),
            format_interval(value.get("ci95")),
            str(value.get("n", "")),
        ]
        if baseline:
            d = deltas.get(name) or {}
            row += [
                format_value(d.get("baseline")),
                format_delta(d.get("delta")),
                format_interval(d.get("ci95"), signed=True),
                format_p(d.get("p_value")),
            ]
        rows.append(row)
    return ["### Metrics", "", *_table(header, rows, "lrrrrrrr"), ""]


def _latency(report: Report) -> list[str]:
    lat = report.get("latency") or {}
    if not any(_finite(v) is not None for v in lat.values()):
        return []
    return [
        f"**Latency** — retrieval P50 {format_seconds(lat.get('retrieval_p50_s'))}, "
        f"P95 {format_seconds(lat.get('retrieval_p95_s'))} · pipeline P50 {format_seconds(lat.get('pipeline_p50_s'))}, "
        f"P95 {format_seconds(lat.get('pipeline_p95_s'))}",
        "",
    ]


def _by_type(report: Report) -> list[str]:
    by_type: Mapping[str, Any] = report.get("by_question_type") or {}
    if not by_type:
        return []
    rows = []
    for qtype, section in by_type.items():
        primary = section.get("primary_metric")
        value = (section.get("metrics") or {}).get(primary) or {} if primary else {}
        rows.append(
            [
                escape_cell(qtype),
                str(section.get("questions", 0)),
                code(primary) if primary else "—",
                format_value(value.get("mean")),
                format_interval(value.get("ci95")),
            ]
        )
    header = ["question type", "questions", "primary metric", "mean", "95% CI"]
    return ["### By question type", "", *_table(header, rows, "lrlrr"), ""]


def _by_difficulty(report: Report) -> list[str]:
    """Per difficulty: questions and the composite (the one number every question type has)."""
    by_difficulty: Mapping[str, Any] = report.get("by_difficulty") or {}
    if not by_difficulty:
        return []
    rows = []
    for difficulty, section in by_difficulty.items():
        value = (section.get("metrics") or {}).get("composite") or {}
        rows.append([escape_cell(difficulty), str(section.get("questions", 0)), format_value(value.get("mean")),
                     format_interval(value.get("ci95"))])
    return ["### By difficulty", "", *_table(["difficulty", "questions", "composite", "95% CI"], rows, "lrrr"), ""]


def _counts(title: str, counts: Mapping[str, Any], order: Sequence[str]) -> list[str]:
    if not counts:
        return []
    keys = [k for k in order if k in counts] + [k for k in counts if k not in order]
    total = sum(int(counts[k] or 0) for k in keys)
    rows = []
    for key in keys:
        n = int(counts[key] or 0)
        share = f"{n / total:.0%}" if total else "—"
        rows.append([code(key), str(n), share])
    return [f"### {title}", "", *_table(["", "questions", "share"], rows, "lrr"), ""]


def _why_with_contradictions(item: Mapping[str, Any]) -> str:
    """The row's reason, then each contradicted claim with the context sentence that decides it."""
    parts = [str(item.get("why") or "")]
    for c in item.get("contradicted_claims") or []:
        parts.append(f"contradicts its sources: “{c.get('claim')}” ({c.get('reason')}; source: “{c.get('evidence')}”)")
    return "; ".join(p for p in parts if p)


def _worst(report: Report, limit: int) -> list[str]:
    worst = list(report.get("worst") or [])
    if not worst or limit <= 0:
        return []
    rows = [
        [
            code(item.get('id'), 60),
            escape_cell(item.get("question")),
            code(item.get('verdict') or '—'),
            escape_cell(_why_with_contradictions(item)),
        ]
        for item in worst[:limit]
    ]
    lines = [f"### Worst {min(limit, len(worst))} questions", "", *_table(["id", "question", "verdict", "why"], rows)]
    if len(worst) > limit:
        lines.append(f"\n… and {len(worst) - limit} more in the JSON report.")
    return [*lines, ""]


def _problems(report: Report) -> list[str]:
    problems = report.get("problems") or {}
    count = int(problems.get("count") or 0)
    if not count:
        return []
    by_reason: Mapping[str, Any] = problems.get("by_reason") or {}
    reasons = ", ".join(f"{code(k)} {v}" for k, v in sorted(by_reason.items()))
    lines = [f"### ⚠️ {count} row problems", "", f"By reason: {reasons}", ""]
    items = list(problems.get("items") or [])
    rows = [
        [
            escape_cell(item.get("source") or "—"),
            str(item.get("line")) if item.get("line") is not None else "—",
            code(item.get('row_id'), 60) if item.get("row_id") else "—",
            code(item.get('reason')),
            escape_cell(item.get("message")),
        ]
        for item in items[:MAX_PROBLEM_ITEMS]
    ]
    if rows:
        lines += _table(["source", "line", "id", "reason", "message"], rows, "lrlll")
    if len(items) > MAX_PROBLEM_ITEMS:
        lines.append(f"\n… and {len(items) - MAX_PROBLEM_ITEMS} more in the JSON report.")
    return [*lines, ""]


def _cap(text: str, max_chars: int) -> str:
    """Cut at a line boundary so the text (with the note) fits ``max_chars``."""
    if len(text) <= max_chars:
        return text
    note = f"\n\n> ✂️ Truncated to fit {max_chars:,} characters; the full results are in the JSON report.\n"
    budget = max(0, max_chars - len(note))
    cut = text.rfind("\n", 0, budget)
    return text[: cut if cut > 0 else budget] + note


def render_markdown(report: Report, *, worst: int = DEFAULT_WORST, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The report as GitHub-flavoured Markdown, at most ``max_chars`` characters long.

    ``worst`` caps the worst-questions table (the report's ``worst`` list is already ordered).
    """
    if max_chars < 200:
        raise ValueError(f"max_chars must be at least 200, got {max_chars}")
    lines = [
        *_header(report),
        *_gate_table(report),
        *_metrics_table(report),
        *_by_type(report),
        *_by_difficulty(report),
        *_latency(report),
        *_counts("Diagnosis verdicts", report.get("verdicts") or {}, VERDICT_ORDER),
        *_counts("Multi-hop misses", report.get("multi_hop_misses") or {}, MISS_ORDER),
        *_worst(report, worst),
        *_problems(report),
    ]
    return _cap("\n".join(lines).rstrip() + "\n", max_chars)
