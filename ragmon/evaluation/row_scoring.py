"""Every metric of one golden row: retrieval metrics against the gold documents, the judge's
generation metrics (the same judges as the agent), the composite and the diagnosis verdict.

A row whose app call failed (``Observation.problem``) gets no metrics: it is reported with its
problem and counted, never averaged in as zeros. A judge failure on one row keeps that row's
retrieval metrics and records the failure (``judge_failed``) in the row's problem.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .. import semconv as sc
from ..errors import JudgeError
from ..evaluators import EvaluatorSet
from ..scoring.judge import EvalJudge, EvalRequest, Judge
from ..scoring.metrics.citations import DEFAULT_CITATION_PATTERN
from ..scoring.metrics.diagnosis import diagnose
from ..types import ScoreDetails, Scores
from . import gate, ir
from .types import PROBLEM_JUDGE_FAILED, GoldenRow, Observation, RowProblem, RowResult

log = logging.getLogger(__name__)


Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ScoringOptions:
    ks: tuple[int, ...] = ir.DEFAULT_KS
    primary_k: int = 5  # cut-off of the primary metrics, two-hop miss classes and the composite
    thresholds: Mapping[str, float] | None = None  # diagnosis thresholds (None: the table's)
    citation_pattern: str | None = DEFAULT_CITATION_PATTERN  # None: no citation metrics
    judge_concurrency: int = 4
    evaluators: EvaluatorSet | None = None  # --evaluators: run on every observed row


def retrieval_part(row: GoldenRow, observation: Observation, options: ScoringOptions) -> tuple[dict[str, float | None],
                                                                                                str | None]:
    """Retrieval metrics of one row and its multi-hop miss class (pure)."""
    ranking = observation.retrieved_ids
    metrics = ir.retrieval_metrics(ranking, row.ground_truth_docs, options.ks, row.hops)
    miss = ir.classify_hop_miss(ir.dedupe(ranking), row.hops, options.primary_k) if row.hops else None
    return metrics, miss


def eval_request(row: GoldenRow, options: ScoringOptions) -> EvalRequest:
    return EvalRequest(
        reference=row.ground_truth_answer,
        citation_pattern=options.citation_pattern,
        expect_abstention=row.question_type == "no_answer",
    )


async def judge_row(judge: Judge, row: GoldenRow, observation: Observation,
                    options: ScoringOptions) -> tuple[Scores | None, RowProblem | None]:
    """The judge's scores of one row; a JudgeError becomes a ``judge_failed`` problem."""
    trace = observation.trace
    if trace is None:
        return None, None
    try:
        if isinstance(judge, EvalJudge):
            return await judge.score_for_eval(trace, eval_request(row, options)), None
        return await judge.score(trace), None
    except JudgeError as exc:
        message = f"judge {judge.name} failed ({exc.reason}): {exc}"
    except Exception as exc:  # a judge bug must not end the run; the row is reported
        log.exception("judge %s raised on row %s", judge.name, row.id)
        message = f"judge {judge.name} raised {type(exc).__name__}: {exc}"
    return None, RowProblem(PROBLEM_JUDGE_FAILED, message, line=row.line, row_id=row.id, source="judge")


def combine(row: GoldenRow, observation: Observation, scores: Scores | None, judge_problem: RowProblem | None,
            options: ScoringOptions) -> RowResult:
    """Merge retrieval metrics, judge scores, composite and verdict into the row's result (pure)."""
    if observation.trace is None:
        return RowResult(row=row, observation=observation, metrics={})
    metrics: dict[str, float | None] = {}
    retrieval, miss = retrieval_part(row, observation, options)
    metrics.update(retrieval)
    details: ScoreDetails = {}
    verdict: str | None = None
    reason = ""
    if options.evaluators:  # merged as the agent merges a judged trace's (EvaluatorSet.merge)
        scores, _ = options.evaluators.merge(observation.trace, scores)
    roles = options.evaluators.roles if options.evaluators else None
    if scores is not None:
        metrics.update(scores.values)
        metrics.update(scores.custom)
        details = scores.details.copy()
        if scores.as_dict() or any(v is not None for v in scores.custom.values()):
            verdict, reason = diagnose(scores, options.thresholds, roles)
    metrics[gate.COMPOSITE] = gate.composite_score(metrics, row.question_type, options.primary_k)
    if judge_problem is not None:
        details["judge_problem"] = judge_problem.message
    if miss is not None and verdict in (None, sc.VERDICT_OK):
        # retrieval missed a hop the answer needed: say so even when the judge saw nothing wrong
        reason = f"{miss} at k={options.primary_k}" + (f"; {reason}" if reason else "")
    return RowResult(row=row, observation=observation, metrics=metrics, verdict=verdict, verdict_reason=reason,
                     miss_class=miss, details=details)


async def score_rows(
    rows: Sequence[GoldenRow],
    observations: Sequence[Observation],
    judge: Judge | None,
    options: ScoringOptions | None = None,
    progress: Progress | None = None,
) -> tuple[list[RowResult], list[RowProblem]]:
    """Score every observed row (row order); returns the results and the judge problems."""
    options = options or ScoringOptions()
    by_id = {o.row_id: o for o in observations}
    semaphore = asyncio.Semaphore(max(1, options.judge_concurrency))
    total, done = len(rows), 0

    async def one(row: GoldenRow) -> tuple[RowResult, RowProblem | None]:
        nonlocal done
        observation = by_id.get(row.id) or Observation(row_id=row.id, trace=None)
        scores, problem = None, None
        if judge is not None and observation.trace is not None:
            async with semaphore:
                scores, problem = await judge_row(judge, row, observation, options)
        done += 1
        if progress is not None:
            progress(done, total)
        return combine(row, observation, scores, problem, options), problem

    pairs = await asyncio.gather(*(one(row) for row in rows))
    return [result for result, _ in pairs], [problem for _, problem in pairs if problem is not None]
