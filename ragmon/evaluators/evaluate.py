"""``EvaluatorSet``: the evaluators of one file, run on a judged trace.

Rule-based kinds run here, for either judge; ``llm`` criteria are judged by the LLM judge inside
its compact call and arrive in ``Scores.custom`` — this set only names them (``criteria``) and
notices a verdict the reply left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from .. import semconv as sc
from ..types import RagTrace, Scores
from . import spec as s
from .checks import Outcome, run_heuristic, run_json_schema, run_regex

MAX_REASON_CHARS: Final = 160


@dataclass(frozen=True, slots=True)
class Results:
    """Scores (1.0 / 0.0 / None) and short reasons of every evaluator on one trace; ``errors`` holds
    (name, bounded reason) for each that could not be judged."""

    scores: dict[str, float | None]
    reasons: dict[str, str]
    errors: tuple[tuple[str, str], ...]


class EvaluatorSet:
    """Every declared evaluator; empty when no file was given (then it does nothing)."""

    def __init__(self, specs: Sequence[s.EvaluatorSpec] = ()) -> None:
        self.specs: tuple[s.EvaluatorSpec, ...] = tuple(specs)
        self.by_name: Mapping[str, s.EvaluatorSpec] = {e.name: e for e in self.specs}
        self.criteria: tuple[s.EvaluatorSpec, ...] = tuple(e for e in self.specs if e.kind == s.KIND_LLM)
        self._rules = tuple(e for e in self.specs if e.kind != s.KIND_LLM)

    def __bool__(self) -> bool:
        return bool(self.specs)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.specs)

    def thresholds(self) -> dict[str, float]:
        return {e.name: e.threshold for e in self.specs}

    @property
    def roles(self) -> dict[str, str]:
        """The diagnosis role of each evaluator that declares one (``diagnose``'s ``roles``)."""
        return {e.name: e.role for e in self.specs if e.role}

    def merge(self, trace: RagTrace, scores: Scores | None) -> tuple[Scores, Results]:
        """The judge's scores with every evaluator's added: the one place judge and evaluator
        results meet, for the agent's judged traces and ``ragmon eval``'s rows alike. Evaluator
        scores go to ``custom`` (the LLM judge's criteria verdicts, read from ``scores.custom``, among
        them), their reasons to ``details[DETAIL_EVALUATORS]``; ``Results`` also lists the errors."""
        results = self.run(trace.question, trace.answer, trace.contexts, scores.custom if scores else None)
        base = scores if scores is not None else Scores({})
        details = base.details.copy()
        if results.reasons:
            details[sc.DETAIL_EVALUATORS] = dict(results.reasons)
        return dataclasses.replace(base, custom=results.scores, details=details), results

    def run(self, question: str | None, answer: str | None, contexts: Sequence[str],
            judged: Mapping[str, float | None] | None = None) -> Results:
        """Run the rule-based evaluators; ``judged`` holds the LLM judge's criteria verdicts (a
        criterion missing from it is an error ``missing_verdict``, its score None, never guessed)."""
        scores: dict[str, float | None] = {}
        reasons: dict[str, str] = {}
        errors: list[tuple[str, str]] = []
        for e in self.specs:
            if e.kind == s.KIND_LLM:
                value = (judged or {}).get(e.name)
                scores[e.name] = value
                if value is None:
                    errors.append((e.name, "missing_verdict"))
                continue
            outcome = self._one(e, question, answer, contexts)
            scores[e.name] = outcome.score
            if outcome.reason:
                reasons[e.name] = outcome.reason[:MAX_REASON_CHARS]
            if outcome.error is not None:
                errors.append((e.name, outcome.error))
        return Results(scores, reasons, tuple(errors))

    @staticmethod
    def _one(e: s.EvaluatorSpec, question: str | None, answer: str | None, contexts: Sequence[str]) -> Outcome:
        if e.kind == s.KIND_REGEX:
            return run_regex(e, question, answer, contexts)
        if e.kind == s.KIND_HEURISTIC:
            return run_heuristic(e, answer)
        return run_json_schema(e, answer)
