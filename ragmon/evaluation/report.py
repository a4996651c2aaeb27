"""The JSON report of one evaluation run (schema ``ragmon.eval/1``), built from the row results.

Pure: rows, problems and options in, a JSON-ready dict out. Every aggregate is the mean of the
per-question values that are computable (None = not computable, left out, and counted in ``n``),
with a percentile-bootstrap 95% interval (``stats.bootstrap_mean``). ``questions`` counts the
rows that were evaluated (the app produced a trace); rows that could not be run are listed under
``problems`` and never averaged in as zeros.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np

from .. import quality
from .. import semconv as sc
from .._version import __version__
from ..scoring import claim_verdicts
from . import gate as gates
from . import ir, stats
from .types import DIFFICULTIES, QUESTION_TYPES, RowProblem, RowResult

SCHEMA: Final = "ragmon.eval/1"
DEFAULT_WORST: Final = 10
RETRIEVAL_P95: Final = "retrieval_p95_s"
LATENCY_KEYS: Final = ("retrieval_p50_s", RETRIEVAL_P95, "pipeline_p50_s", "pipeline_p95_s")
_RETRIEVAL_PREFIXES: Final = ("hit", "recall", "precision", "ndcg", "two_hop_recall")


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Who ran what: copied into the report's header."""

    evalset: str = ""
    app: str | None = None
    judge: str = "none"
    ks: tuple[int, ...] = ir.DEFAULT_KS
    primary_k: int = 5
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    n_resamples: int = stats.DEFAULT_RESAMPLES
    seed: int = stats.DEFAULT_SEED
    worst: int = DEFAULT_WORST


def evalset_name(path: str) -> str:
    """A bounded label value for the eval set: its file stem, limited to [A-Za-z0-9_.-]."""
    stem = Path(path).stem if path else "evalset"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem)[:64] or "evalset"


def metric_order(names: Iterable[str], ks: Sequence[int]) -> list[str]:
    """Report order: retrieval metrics by kind then k, mrr, quality metrics (table order), composite."""
    present = set(names)
    ordered = [f"{prefix}@{k}" for prefix in _RETRIEVAL_PREFIXES for k in ks]
    ordered += ["mrr", *quality.names(), gates.COMPOSITE]
    out = [name for name in ordered if name in present]
    return out + sorted(present - set(out))


def _aggregate(results: Sequence[RowResult], names: Sequence[str], info: RunInfo) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        values = [r.metrics.get(name) for r in results]
        if all(v is None for v in values):
            continue
        out[name] = stats.bootstrap_mean(values, n_resamples=info.n_resamples, seed=info.seed).to_dict()
    return out


def _percentile(values: Iterable[float | None], q: float) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.percentile(finite, q)) if finite else None


def latency(results: Sequence[RowResult]) -> dict[str, float | None]:
    """P50/P95 of retrieval and pipeline latency over the evaluated rows (seconds)."""
    traces = [r.observation.trace for r in results if r.observation.trace is not None]
    retrieval = [t.retrieval_latency_s for t in traces]
    pipeline = [t.pipeline_latency_s for t in traces]
    return {
        "retrieval_p50_s": _percentile(retrieval, 50),
        RETRIEVAL_P95: _percentile(retrieval, 95),
        "pipeline_p50_s": _percentile(pipeline, 50),
        "pipeline_p95_s": _percentile(pipeline, 95),
    }


def _problem_dict(p: RowProblem) -> dict[str, Any]:
    return {"reason": p.reason, "message": p.message, "line": p.line, "row_id": p.row_id, "source": p.source}


def _row_dict(r: RowResult) -> dict[str, Any]:
    trace = r.observation.trace
    problem = r.observation.problem
    judge_problem = r.details.get("judge_problem")
    row: dict[str, Any] = {
        "id": r.row.id,
        "question": r.row.question,
        "question_type": r.row.question_type,
        "difficulty": r.row.difficulty,
        "retrieved_ids": list(r.observation.retrieved_ids),
        "metrics": dict(r.metrics),
        "verdict": r.verdict,
        "verdict_reason": r.verdict_reason,
        "miss_class": r.miss_class,
        "problem": _problem_dict(problem) if problem is not None else None,
        "latency": {
            "retrieval_s": trace.retrieval_latency_s if trace else None,
            "pipeline_s": trace.pipeline_latency_s if trace else None,
        },
        "answer": trace.answer if trace else None,
    }
    if judge_problem:
        row["judge_problem"] = judge_problem
    if r.details:
        row["details"] = _jsonable(r.details)
    return row


def _jsonable(value: Any, depth: int = 0) -> Any:
    """Judge details made JSON-safe (tuples to lists, unknown objects to str), bounded in depth."""
    if depth > 6:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


def _why(r: RowResult) -> str:
    parts = [r.verdict_reason] if r.verdict_reason else []
    for detail in (r.details.get("reason"), r.details.get("judge_problem")):
        if detail:
            parts.append(detail)
    return "; ".join(parts) or "lowest composite"


def worst(results: Sequence[RowResult], n: int) -> list[dict[str, Any]]:
    """The ``n`` evaluated rows with the lowest composite (failed verdicts first on ties)."""
    scored = [r for r in results if r.observation.trace is not None and r.metrics.get(gates.COMPOSITE) is not None]

    def key(r: RowResult) -> tuple[float, int, str]:
        return (float(r.metrics[gates.COMPOSITE] or 0.0), int(r.verdict in (None, sc.VERDICT_OK)), r.row.id)

    return [
        {"id": r.row.id, "question": r.row.question, "question_type": r.row.question_type, "verdict": r.verdict,
         "why": _why(r), "metrics": {k: v for k, v in r.metrics.items() if v is not None},
         "contradicted_claims": claim_verdicts.contradicted(r.details)}
        for r in sorted(scored, key=key)[:n]
    ]


def _breakdown(results: Sequence[RowResult], attr: str, keys: Sequence[str], names: Sequence[str], info: RunInfo,
               primary: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        group = [r for r in results if getattr(r.row, attr) == key]
        if not group:
            continue
        entry: dict[str, Any] = {"questions": len(group)}
        if primary:
            entry["primary_metric"] = ir.primary_metric(key, info.primary_k)
        entry["metrics"] = _aggregate(group, names, info)
        out[key] = entry
    return out


def run_metrics(report: Mapping[str, Any]) -> gates.RunMetrics:
    """The gate's view of a report (this run's or a baseline read from JSON)."""
    per_question = {
        str(row["id"]): {k: v for k, v in (row.get("metrics") or {}).items() if isinstance(v, int | float) or v is None}
        for row in report.get("rows", [])
        if row.get("problem") is None
    }
    aggregates = {k: v for k, v in (report.get("latency") or {}).items() if isinstance(v, int | float)}
    return gates.RunMetrics(per_question=per_question, aggregates=aggregates)


def baseline_section(current: gates.RunMetrics, baseline: Mapping[str, Any], names: Sequence[str],
                     info: RunInfo, path: str) -> dict[str, Any]:
    """Per-metric delta against a baseline report: paired bootstrap over the shared question ids."""
    base = run_metrics(baseline)
    deltas: dict[str, Any] = {}
    for name in names:
        paired = stats.paired_bootstrap(current.column(name), base.column(name),
                                        n_resamples=info.n_resamples, seed=info.seed)
        if paired.n == 0:
            continue
        deltas[name] = {"baseline": paired.baseline_mean, "current": paired.current_mean, "delta": paired.mean_delta,
                        "ci95": list(paired.ci95) if paired.ci95 else None, "p_value": paired.p_value,
                        "n": paired.n}
    for key in LATENCY_KEYS:
        now, then = current.aggregate(key), base.aggregate(key)
        if now is not None and then is not None:
            deltas[key] = {"baseline": then, "current": now, "delta": now - then, "ci95": None, "p_value": None}
    shared = set(current.per_question) & set(base.per_question)
    return {"path": path, "created_at": baseline.get("created_at"), "shared_questions": len(shared), "deltas": deltas}


def build_report(
    results: Sequence[RowResult],
    problems: Sequence[RowProblem],
    info: RunInfo,
    *,
    rules: Sequence[gates.GateRule] = gates.DEFAULT_RULES,
    baseline: Mapping[str, Any] | None = None,
    baseline_path: str = "",
    significance: float | None = None,
) -> dict[str, Any]:
    """Assemble the report; ``problems`` are every RowProblem of the run (input, app, judge)."""
    evaluated = [r for r in results if r.observation.trace is not None]
    names = metric_order({name for r in evaluated for name in r.metrics}, info.ks)
    all_problems = list(problems)
    by_reason = Counter(p.reason for p in all_problems)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "ragmon_version": __version__,
        "created_at": info.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "evalset": info.evalset,
        "evalset_name": evalset_name(info.evalset),
        "app": info.app,
        "judge": info.judge,
        "questions": len(evaluated),
        "rows_total": len(results),
        "k": list(info.ks),
        "problems": {"count": len(all_problems), "by_reason": dict(sorted(by_reason.items())),
                     "items": [_problem_dict(p) for p in all_problems]},
        "metrics": _aggregate(evaluated, names, info),
        "latency": latency(evaluated),
        "primary_metric": {t: m for t in QUESTION_TYPES if (m := ir.primary_metric(t, info.primary_k)) is not None},
        "by_question_type": _breakdown(evaluated, "question_type", QUESTION_TYPES, names, info, primary=True),
        "by_difficulty": _breakdown(evaluated, "difficulty", DIFFICULTIES, names, info, primary=False),
        "verdicts": {v: sum(1 for r in evaluated if r.verdict == v) for v in sc.VERDICTS},
        "multi_hop_misses": {m: sum(1 for r in evaluated if r.miss_class == m) for m in ir.MISS_CLASSES},
        "worst": worst(evaluated, info.worst),
        "baseline": None,
        "gate": None,
        "rows": [_row_dict(r) for r in results],
    }
    current = run_metrics(report)
    base_metrics = None
    if baseline is not None:
        report["baseline"] = baseline_section(current, baseline, names, info, baseline_path)
        base_metrics = run_metrics(baseline)
    result = gates.evaluate_gate(rules, current, base_metrics, significance=significance,
                                 n_resamples=info.n_resamples, seed=info.seed)
    report["gate"] = result.to_dict()
    return report
