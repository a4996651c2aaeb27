"""Compact mode (the default): ONE chat call per trace returns the answer's claims with
verdicts, a relevance verdict per context and a few generated questions; answer relevancy then
comes from embeddings, so it costs no further LLM call."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ... import semconv as sc
from ...types import Scores
from ..judge import Criterion
from ..metrics import formulas
from . import prompts as p
from ._calls import TraceCalls
from ._settings import NAME
from .criteria import criteria_messages, criteria_only_schema, parse_criteria, with_criteria, with_criteria_schema
from .verdicts import CompactVerdict, compact_schema, parse_compact


async def score_compact(calls: TraceCalls, inp: p.JudgeInput, criteria: Sequence[Criterion] = ()) -> Scores:
    """One chat call; user-declared ``criteria`` are judged inside it (``criteria.py``)."""
    n = len(inp.contexts)
    verdict, judged = await calls.json(
        with_criteria(p.compact_messages(inp), criteria), "rag_judgement",
        with_criteria_schema(compact_schema(n), criteria),
        lambda o: (parse_compact(o, n), parse_criteria(o, criteria)),
    )
    scores = await compact_scores(calls, inp, verdict)
    return dataclasses.replace(scores, custom=judged) if criteria else scores


async def score_criteria(
    calls: TraceCalls, inp: p.JudgeInput, criteria: Sequence[Criterion]
) -> dict[str, float | None]:
    """The criteria in a call of their own (parity mode, offline evaluation)."""
    return await calls.json(criteria_messages(inp, criteria), "rag_criteria", criteria_only_schema(criteria),
                            lambda o: parse_criteria(o, criteria))


async def compact_scores(calls: TraceCalls, inp: p.JudgeInput, verdict: CompactVerdict) -> Scores:
    """The online metrics from a compact verdict (offline evaluation's verdict has one inside)."""
    n = len(inp.contexts)
    claim_verdicts = [v for _, v in verdict.claims]
    relevancy = await calls.answer_relevancy(inp.question, verdict.questions, verdict.noncommittal)
    return Scores(
        {
            sc.METRIC_FAITHFULNESS: formulas.faithfulness(claim_verdicts) if n else None,
            sc.METRIC_ANSWER_RELEVANCY: relevancy,
            sc.METRIC_CONTEXT_PRECISION: formulas.context_precision(verdict.context_relevant),
        },
        judge=NAME,
        details={
            "claims": [{"claim": c, "supported": v} for c, v in verdict.claims],
            "context_relevant": list(verdict.context_relevant),
            "generated_questions": list(verdict.questions),
            "noncommittal": verdict.noncommittal,
        },
    )
