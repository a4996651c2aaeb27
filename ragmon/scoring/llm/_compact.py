"""Compact mode (the default): ONE chat call per trace returns the answer's claims with
verdicts, a relevance verdict per context and a few generated questions; answer relevancy then
comes from embeddings, so it costs no further LLM call."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ... import semconv as sc
from ...types import ScoreDetails, Scores
from .. import claim_verdicts as cv
from ..judge import Criterion
from ..metrics import formulas
from . import prompts as p
from ._calls import TraceCalls
from ._settings import NAME
from .criteria import criteria_messages, criteria_only_schema, parse_criteria, with_criteria, with_criteria_schema
from .evidence import checked
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
    """The online metrics from a compact verdict (offline evaluation's verdict has one inside).
    A contradiction counts only when its evidence quotes a context (``evidence.checked``)."""
    n = len(inp.contexts)
    verdict = checked(verdict, inp.contexts, p.answer_sentences(inp.answer))
    calls.count_invalid_contradictions(verdict.invalid_contradictions)
    supported = [v and i not in verdict.contradicted for i, (_, v) in enumerate(verdict.claims)]
    relevancy = await calls.answer_relevancy(inp.question, verdict.questions, verdict.noncommittal)
    faithfulness = formulas.faithfulness_with_contradictions(supported, len(verdict.contradicted)) if n else None
    return Scores(
        {
            sc.METRIC_FAITHFULNESS: faithfulness,
            sc.METRIC_ANSWER_RELEVANCY: relevancy,
            sc.METRIC_CONTEXT_PRECISION: formulas.context_precision(verdict.context_relevant),
        },
        judge=NAME,
        details={
            "claims": [{"claim": c, "supported": v} for c, v in verdict.claims],
            cv.DETAIL_KEY: cv.as_details(_claim_verdict(i, c, v, verdict) for i, (c, v) in enumerate(verdict.claims)),
            "supported_share": formulas.faithfulness(supported),  # the RAGAS definition
            **_invalid_details(verdict.invalid_contradictions),
            "context_relevant": list(verdict.context_relevant),
            "generated_questions": list(verdict.questions),
            "noncommittal": verdict.noncommittal,
        },
    )


def _claim_verdict(i: int, claim: str, supported: bool, verdict: CompactVerdict) -> cv.ClaimVerdict:
    if i in verdict.contradicted:
        evidence, reason = verdict.contradicted[i]
        return cv.ClaimVerdict(claim, cv.CONTRADICTED, evidence or None, reason or None)
    return cv.ClaimVerdict(claim, cv.SUPPORTED if supported else cv.UNSUPPORTED)


def _invalid_details(invalid: Mapping[str, int]) -> ScoreDetails:
    """``invalid_contradictions``: items dropped in all, and by reason (absent when none was)."""
    total = sum(invalid.values())
    if not total:
        return {}
    return {"invalid_contradictions": total, "invalid_contradiction_reasons": dict(sorted(invalid.items()))}
