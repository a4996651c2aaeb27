"""Parity mode: RAGAS's own recipe — statement extraction, then NLI verdicts; N question
generations; one call per context — for numbers comparable with RAGAS. The calls of one trace
run concurrently; the first failure cancels the others."""

from __future__ import annotations

import asyncio
from typing import Any

from ... import semconv as sc
from ...errors import JudgeError
from ...types import Scores
from ..metrics import formulas
from . import prompts as p
from ._calls import TraceCalls
from ._settings import NAME
from .verdicts import (
    CONTEXT_VERDICT_SCHEMA,
    NLI_SCHEMA,
    QUESTION_SCHEMA,
    STATEMENTS_SCHEMA,
    parse_context_verdict,
    parse_nli,
    parse_question,
    parse_statements,
)


async def score_parity(calls: TraceCalls, inp: p.JudgeInput) -> Scores:
    return (await parity(calls, inp))[0]


async def parity(calls: TraceCalls, inp: p.JudgeInput) -> tuple[Scores, tuple[str, ...]]:
    """Parity-mode scores and the answer's statements (offline evaluation reuses them)."""

    async def claims() -> tuple[tuple[str, ...], tuple[bool, ...]]:
        statements = await calls.json(
            p.statements_messages(inp.question, inp.answer), "statements", STATEMENTS_SCHEMA, parse_statements,
        )
        if not statements or not inp.contexts:
            return statements, ()
        verdicts = await calls.json(
            p.nli_messages(inp.contexts, statements), "nli_verdicts", NLI_SCHEMA,
            lambda o: parse_nli(o, len(statements)),
        )
        return statements, verdicts

    async def question() -> tuple[str, bool]:
        return await calls.json(
            p.question_messages(inp.answer), "generated_question", QUESTION_SCHEMA, parse_question,
            temperature=0.7 if calls.parity_questions > 1 else None,  # RAGAS samples N different questions
        )

    async def context(ctx: str) -> bool:
        return await calls.json(
            p.context_verdict_messages(inp.question, ctx, inp.answer), "context_verdict",
            CONTEXT_VERDICT_SCHEMA, parse_context_verdict,
        )

    try:
        async with asyncio.TaskGroup() as group:  # one failure cancels the sibling calls
            claims_task = group.create_task(claims())
            question_tasks = [group.create_task(question()) for _ in range(calls.parity_questions)]
            context_tasks = [group.create_task(context(c)) for c in inp.contexts]
    except BaseExceptionGroup as group_error:
        raise first_judge_error(group_error) from None

    statements, nli = claims_task.result()
    generated = [t.result() for t in question_tasks]
    noncommittal = any(nc for _, nc in generated)
    relevancy = await calls.answer_relevancy(inp.question, [q for q, _ in generated if q], noncommittal)
    relevant = [t.result() for t in context_tasks]
    return Scores(
        {
            sc.METRIC_FAITHFULNESS: formulas.faithfulness(nli) if inp.contexts else None,
            sc.METRIC_ANSWER_RELEVANCY: relevancy,
            sc.METRIC_CONTEXT_PRECISION: formulas.context_precision(relevant),
        },
        judge=NAME,
        details={
            "claims": [{"claim": s, "supported": v} for s, v in zip(statements, nli, strict=False)],
            "context_relevant": relevant,
            "generated_questions": [q for q, _ in generated],
            "noncommittal": noncommittal,
        },
    ), statements


def first_judge_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The error to raise for a failed task group: its first ``JudgeError``, else an internal one."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return first_judge_error(exc)
        if isinstance(exc, JudgeError):
            return exc
    first = group.exceptions[0]
    if isinstance(first, Exception):
        return JudgeError(f"internal error in the LLM judge: {type(first).__name__}")
    return first
