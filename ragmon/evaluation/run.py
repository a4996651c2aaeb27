"""One evaluation run, end to end, without the command line: what ``ragmon eval`` and
``ragmon.testing`` share.

golden set -> observations (in-process app | responses file | OTLP traces file) -> row results
(IR metrics + the agent's judges) -> report (aggregates, breakdowns, baseline deltas, gate).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import semconv as sc
from ..evaluators import EvaluatorSet
from ..scoring.judge import Judge
from ..scoring.metrics.citations import DEFAULT_CITATION_PATTERN
from . import gate as gates
from . import ir
from .app_runner import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT_S, run_app
from .goldenset import load_golden_set
from .report import RunInfo, build_report
from .responses import load_responses
from .row_scoring import ScoringOptions, score_rows
from .traces_file import load_traces
from .types import GoldenSet, Observation, RowProblem, RowResult

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass(frozen=True, slots=True)
class EvalOptions:
    """Everything a run needs besides the judge. Exactly one of app / responses / traces."""

    evalset: str
    app: str | Callable[..., Any] | None = None
    responses: str | None = None
    traces: str | None = None
    doc_id_field: str | None = None
    ks: tuple[int, ...] = ir.DEFAULT_KS
    primary_k: int | None = None  # None: 5 when it is one of ks, else the cut-off closest to 5
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = DEFAULT_TIMEOUT_S
    judge_concurrency: int = 4
    citation_pattern: str | None = DEFAULT_CITATION_PATTERN
    thresholds: Mapping[str, float] | None = None
    rules: tuple[gates.GateRule, ...] = gates.DEFAULT_RULES
    baseline: Mapping[str, Any] | None = None
    baseline_path: str = ""
    significance: float | None = None
    n_resamples: int = 2000
    seed: int = 0
    worst: int = 10
    judge_label: str = "none"
    extra_problems: tuple[RowProblem, ...] = field(default_factory=tuple)
    evaluators: EvaluatorSet = field(default_factory=EvaluatorSet)  # --evaluators: one metric each

    def __post_init__(self) -> None:
        sources = [s for s in (self.app, self.responses, self.traces) if s is not None]
        if len(sources) != 1:
            raise ValueError("exactly one of app, responses or traces is required")
        if self.primary_k is None:
            object.__setattr__(self, "primary_k", min(self.ks, key=lambda k: (abs(k - 5), k)))
        if self.primary_k not in self.ks:
            raise ValueError(f"the primary k ({self.primary_k}) must be one of --k {','.join(map(str, self.ks))}")


async def observe(golden: GoldenSet, options: EvalOptions,
                  progress: Progress | None = None) -> tuple[list[Observation], list[RowProblem]]:
    """Observations for every golden row, plus problems that belong to no row (unknown ids)."""
    if options.app is not None:
        def step(done: int, total: int) -> None:
            if progress is not None:
                progress("app", done, total)

        observations = await run_app(golden.rows, options.app, concurrency=options.concurrency,
                                     timeout_s=options.timeout_s, doc_id_field=options.doc_id_field,
                                     progress=step)
        return observations, []
    if options.responses is not None:
        found = load_responses(options.responses, golden)
    else:
        assert options.traces is not None
        found = load_traces(options.traces, golden, doc_id_field=options.doc_id_field)
    return list(found.observations), list(found.problems)


async def evaluate(options: EvalOptions, judge: Judge | None, progress: Progress | None = None,
                   golden: GoldenSet | None = None) -> dict[str, Any]:
    """Run the whole evaluation and return the JSON report (see ``report.build_report``)."""
    golden = golden if golden is not None else load_golden_set(options.evalset)
    observations, stray = await observe(golden, options, progress)
    scoring = ScoringOptions(ks=options.ks, primary_k=_primary_k(options), thresholds=options.thresholds,
                             citation_pattern=options.citation_pattern, judge_concurrency=options.judge_concurrency,
                             evaluators=options.evaluators)

    def step(done: int, total: int) -> None:
        if progress is not None:
            progress("judge", done, total)

    results, judge_problems = await score_rows(golden.rows, observations, judge, scoring, step)
    results = without_unused_citations(results)
    problems: list[RowProblem] = [*golden.problems, *options.extra_problems]
    problems += [o.problem for o in observations if o.problem is not None]
    problems += stray + judge_problems
    info = RunInfo(evalset=options.evalset, app=_app_label(options), judge=options.judge_label, ks=options.ks,
                   primary_k=_primary_k(options), n_resamples=options.n_resamples, seed=options.seed,
                   worst=options.worst)
    return build_report(results, problems, info, rules=options.rules, baseline=options.baseline,
                        baseline_path=options.baseline_path, significance=options.significance)


def _primary_k(options: EvalOptions) -> int:
    assert options.primary_k is not None  # resolved in EvalOptions.__post_init__
    return options.primary_k


def evaluate_sync(options: EvalOptions, judge: Judge | None, progress: Progress | None = None) -> dict[str, Any]:
    """``evaluate`` for callers without an event loop (pytest tests, scripts)."""
    return asyncio.run(evaluate(options, judge, progress))


def without_unused_citations(results: list[RowResult]) -> list[RowResult]:
    """Drop the citation metrics when no answer of the run carries a citation marker.

    An app that never cites would otherwise report citation presence 0 — a measurement of a
    feature it does not have. One cited answer anywhere keeps them for every row (an app that
    cites sometimes is measured on all its answers).
    """
    if any((r.metrics.get(sc.METRIC_CITATION_PRESENCE) or 0.0) > 0.0 for r in results):
        return results
    dropped = (sc.METRIC_CITATION_PRESENCE, sc.METRIC_CITATION_CORRECTNESS, sc.METRIC_CITATION_COVERAGE)
    return [dataclasses.replace(r, metrics={k: v for k, v in r.metrics.items() if k not in dropped})
            for r in results]


def _app_label(options: EvalOptions) -> str | None:
    if isinstance(options.app, str):
        return options.app
    if options.app is not None:
        return f"{getattr(options.app, '__module__', '?')}:{getattr(options.app, '__qualname__', '?')}"
    return f"responses:{options.responses}" if options.responses else f"traces:{options.traces}"


def parse_rules(fail_if: Sequence[str], warn_if: Sequence[str], defaults: bool,
                primary_k: int = gates.DEFAULT_PRIMARY_K,
                evaluators: EvaluatorSet | None = None) -> tuple[gates.GateRule, ...]:
    """The gate's rules: the defaults at ``primary_k`` (unless turned off), then --fail-if, then --warn-if.

    A --fail-if/--warn-if on the same metric, kind and severity as a default replaces that default
    (``--fail-if "composite drop > 0.2"`` replaces the failing composite default, not the warning).
    Each declared evaluator adds a default fail rule: its pass share below its ``threshold``.
    """
    explicit = [gates.parse_rule(t, gates.SEVERITY_FAIL) for t in fail_if]
    explicit += [gates.parse_rule(t, gates.SEVERITY_WARN) for t in warn_if]
    taken = {(r.metric, r.kind, r.severity) for r in explicit}
    declared = [gates.parse_rule(f"{e.name} < {e.threshold:g}", gates.SEVERITY_FAIL)
                for e in (evaluators.specs if evaluators else ())]
    kept = [r for r in (*gates.default_rules(primary_k), *declared) if (r.metric, r.kind, r.severity) not in taken]
    return (*kept, *explicit) if defaults else tuple(explicit)
