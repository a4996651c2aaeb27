"""Offline evaluation (``score_for_eval``): context recall, answer correctness, abstention and
citation metrics on top of the online ones.

Compact mode: still ONE chat call, with the evaluation variant of the compact prompt
(``prompts.compact_eval_messages``; the online prompt is untouched). Parity mode: RAGAS's extra
calls (reference attribution, reference statements + TP/FP/FN classification, one NLI call per
cited context).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from ... import semconv as sc
from ...types import ScoreDetails, Scores
from ..judge import EvalRequest
from ..metrics import abstention, citations, formulas
from . import prompts as p
from ._calls import TraceCalls
from ._compact import compact_scores
from ._parity import first_judge_error, parity
from ._settings import NAME
from .verdicts import (
    CORRECTNESS_SCHEMA,
    NLI_SCHEMA,
    STATEMENTS_SCHEMA,
    compact_eval_schema,
    parse_compact_eval,
    parse_correctness,
    parse_nli,
    parse_statements,
)

_NO_REFERENCE_CLAIMS = "the reference answer has no claims"


@dataclass(frozen=True)
class EvalTask:
    """What one ``score_for_eval`` call asks beyond the online metrics."""

    request: EvalRequest
    cmap: citations.CitationMap | None
    abstention: abstention.AbstentionCheck

    @property
    def reference_text(self) -> str | None:
        """The reference when it has something to judge (a blank reference is not computable)."""
        ref = self.request.reference
        return ref if ref is not None and p.reference_sentences(ref) else None

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return self.cmap.pairs() if self.cmap is not None else []

    def claim_text(self, index: int) -> str:
        assert self.cmap is not None
        return self.cmap.claims[index].text

    def extra_tokens(self, mode: str) -> int:
        """Input tokens the reference and the cited claims add (for the budget)."""
        ref = p.estimate_tokens(self.request.reference or "")
        cites = sum(p.estimate_tokens(self.claim_text(i)) + 4 for i, _ in self.pairs)
        if mode == "compact":
            return ref + cites + (150 if ref or cites else 0)
        return 3 * ref + cites + 450 * (2 + len({c for _, c in self.pairs}))


async def score_eval(calls: TraceCalls, inp: p.JudgeInput, task: EvalTask, mode: str) -> Scores:
    """The online scores of ``mode`` plus the offline metrics ``task`` enables."""
    if mode == "compact":
        base, extra = await _compact_eval(calls, inp, task)
    else:
        base, extra = await _parity_eval(calls, inp, task)
    values: dict[str, float | None] = {**base.values, **extra.values}
    details: ScoreDetails = {**base.details, **extra.details}
    noncommittal = base.details.get("noncommittal", False)
    abstained = task.abstention.abstained or noncommittal
    details["abstained"] = abstained
    if task.abstention.phrase:
        details["abstention_phrase"] = task.abstention.phrase
    elif noncommittal:
        details["abstention_phrase"] = "judged noncommittal"
    if task.request.expect_abstention:
        values[sc.METRIC_ABSTENTION] = formulas.abstention(abstained)
    return Scores(values, judge=NAME, details=details)


async def _compact_eval(calls: TraceCalls, inp: p.JudgeInput, task: EvalTask) -> tuple[Scores, Scores]:
    """ONE chat call: the compact verdict plus reference claims and citation verdicts."""
    n = len(inp.contexts)
    reference = task.reference_text
    n_refs = len(p.reference_sentences(reference)) if reference is not None else None
    pairs = task.pairs
    named = [(task.claim_text(i), ctx + 1) for i, ctx in pairs]
    verdict = await calls.json(
        p.compact_eval_messages(inp, reference, named), "rag_evaluation",
        compact_eval_schema(n, reference is not None, len(pairs)),
        lambda o: parse_compact_eval(o, n, n_refs, len(pairs)),
    )
    base = await compact_scores(calls, inp, verdict.base)
    values: dict[str, float | None] = {}
    details: ScoreDetails = {}
    if task.request.reference is not None:
        if reference is None:
            values[sc.METRIC_CONTEXT_RECALL] = values[sc.METRIC_ANSWER_CORRECTNESS] = None
            details["reference_reason"] = _NO_REFERENCE_CLAIMS
        else:
            attributed = [a and n > 0 for _, a, _ in verdict.reference_claims]
            tp = sum(verdict.in_reference)
            fp = len(verdict.in_reference) - tp
            fn = sum(1 for _, _, in_answer in verdict.reference_claims if not in_answer)
            similarity = await calls.similarity(inp.answer, reference)
            details["reference_claims"] = [
                {"claim": c, "attributed": a, "in_answer": ia}
                for (c, _, ia), a in zip(verdict.reference_claims, attributed, strict=True)
            ]
            _reference_values(values, details, attributed, (tp, fp, fn, similarity))
            details["claims_in_reference"] = list(verdict.in_reference)
    if task.cmap is not None:
        supported = dict(zip(pairs, verdict.citation_supported, strict=True))
        values.update(citations.metric_values(task.cmap, supported, details))
    return base, Scores(values, judge=NAME, details=details)


async def _parity_eval(calls: TraceCalls, inp: p.JudgeInput, task: EvalTask) -> tuple[Scores, Scores]:
    """RAGAS-like extra calls: reference attribution (context recall), reference statements
    and TP/FP/FN classification (answer correctness), one NLI call per cited context."""
    base, statements = await parity(calls, inp)
    reference = task.reference_text
    values: dict[str, float | None] = {}
    details: ScoreDetails = {}

    async def recall() -> tuple[bool, ...]:
        assert reference is not None
        sentences = p.reference_sentences(reference)
        if not inp.contexts:
            return tuple(False for _ in sentences)
        return await calls.json(
            p.context_recall_messages(inp.contexts, sentences), "context_recall", NLI_SCHEMA,
            lambda o: parse_nli(o, len(sentences)),
        )

    async def correctness() -> tuple[int, int, int, float]:
        assert reference is not None
        ref_statements = await calls.json(
            p.statements_messages(inp.question, reference), "statements", STATEMENTS_SCHEMA, parse_statements,
        )
        if statements and ref_statements:
            in_ref, in_ans = await calls.json(
                p.correctness_messages(inp.question, statements, ref_statements), "answer_correctness",
                CORRECTNESS_SCHEMA, lambda o: parse_correctness(o, len(statements), len(ref_statements)),
            )
        else:
            in_ref, in_ans = tuple(False for _ in statements), tuple(False for _ in ref_statements)
        similarity = await calls.similarity(inp.answer, reference)
        tp = sum(in_ref)
        return tp, len(in_ref) - tp, sum(1 for v in in_ans if not v), similarity

    async def cited(ctx: int, claim_indexes: list[int]) -> dict[tuple[int, int], bool]:
        assert task.cmap is not None
        texts = [task.claim_text(i) for i in claim_indexes]
        verdicts = await calls.json(
            p.nli_messages([inp.contexts[ctx]], texts), "nli_verdicts", NLI_SCHEMA,
            lambda o: parse_nli(o, len(texts)),
        )
        return {(i, ctx): v for i, v in zip(claim_indexes, verdicts, strict=True)}

    by_context: dict[int, list[int]] = {}
    for claim_index, ctx in task.pairs:
        by_context.setdefault(ctx, []).append(claim_index)
    try:
        async with asyncio.TaskGroup() as group:
            recall_task = group.create_task(recall()) if reference is not None else None
            correctness_task = group.create_task(correctness()) if reference is not None else None
            cite_tasks = [group.create_task(cited(ctx, ids)) for ctx, ids in by_context.items()]
    except BaseExceptionGroup as group_error:
        raise first_judge_error(group_error) from None

    if task.request.reference is not None:
        if recall_task is None or correctness_task is None:
            values[sc.METRIC_CONTEXT_RECALL] = values[sc.METRIC_ANSWER_CORRECTNESS] = None
            details["reference_reason"] = _NO_REFERENCE_CLAIMS
        else:
            attributed = recall_task.result()
            details["reference_claims"] = [
                {"claim": c, "attributed": a}
                for c, a in zip(p.reference_sentences(reference or ""), attributed, strict=True)
            ]
            _reference_values(values, details, attributed, correctness_task.result())
    if task.cmap is not None:
        supported: dict[tuple[int, int], bool] = {}
        for t in cite_tasks:
            supported.update(t.result())
        values.update(citations.metric_values(task.cmap, supported, details))
    return base, Scores(values, judge=NAME, details=details)


def _reference_values(
    values: dict[str, float | None], details: ScoreDetails, attributed: Sequence[bool],
    counts: tuple[int, int, int, float],
) -> None:
    """Context recall and answer correctness from the reference claims' attribution and the
    answer's TP/FP/FN counts and similarity to the reference."""
    tp, fp, fn, similarity = counts
    values[sc.METRIC_CONTEXT_RECALL] = formulas.context_recall(attributed)
    values[sc.METRIC_ANSWER_CORRECTNESS] = formulas.answer_correctness(tp, fp, fn, similarity)
    details["answer_correctness_counts"] = {"tp": tp, "fp": fp, "fn": fn}
    details["answer_reference_similarity"] = round(similarity, 3)

