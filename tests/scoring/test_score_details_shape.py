"""Every key a judge writes into ``Scores.details`` is named by ``ScoreDetails``, with a value of the
type it declares: the local judge run offline, the LLM judge against the OpenAI-protocol test server
(compact and parity mode, the cache, dropped contradictions), and the declared evaluators' reasons."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from ragmon.evaluators import EvaluatorSet, parse_evaluators
from ragmon.scoring.judge import EvalRequest
from ragmon.scoring.local import LocalJudge
from ragmon.types import ScoreDetails, Scores
from tests.scoring import test_llm_contradiction_evidence as contradictions
from tests.scoring import test_llm_eval_mode as llm_eval
from tests.scoring import test_reference_metrics as local_eval


def problems(value: Any, hint: Any, where: str) -> list[str]:
    """Where ``value`` does not match the annotation ``hint`` (the forms ``ScoreDetails`` uses)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if origin in (Union, types.UnionType):
        options = [problems(value, a, where) for a in args]
        return [] if any(not p for p in options) else [f"{where}: {value!r} is not {hint}"]
    if is_typeddict(hint):
        return typed_dict_problems(value, hint, where)
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        return [p for i, v in enumerate(value) for p in problems(v, args[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not a dict"]
        return [p for k, v in value.items() for p in problems(k, args[0], where) + problems(v, args[1], f"{where}.{k}")]
    allowed = (int, float) if hint is float else hint  # an int is a float (PEP 484's numeric tower)
    if (isinstance(value, bool) and hint is not bool) or not isinstance(value, allowed):
        return [f"{where}: {value!r} is not {hint.__name__}"]
    return []


def typed_dict_problems(value: Any, hint: Any, where: str) -> list[str]:
    if not isinstance(value, Mapping):
        return [f"{where}: {value!r} is not a mapping"]
    declared = get_type_hints(hint, include_extras=True)
    unknown = [f"{where}: key {k!r} is not in {hint.__name__}" for k in value if k not in declared]
    required = {k for k, h in declared.items() if get_origin(h) is not NotRequired} if hint.__total__ else set()
    missing = [f"{where}: {hint.__name__} needs {k!r}" for k in sorted(required - set(value))]
    plain = get_type_hints(hint)
    return unknown + missing + [p for k, v in value.items() if k in plain
                                for p in problems(v, plain[k], f"{where}.{k}")]


def assert_shaped(scores: Scores) -> set[str]:
    found = typed_dict_problems(scores.details, ScoreDetails, "details")
    assert not found, "\n".join(found)
    return set(scores.details)


def test_the_checker_finds_an_unknown_key_and_a_wrong_type():
    bad: Any = {"claimz": 3, "claims": [{"claim": "a", "supported": "yes"}], "irrelevant_contexts": [True]}
    found = typed_dict_problems(bad, ScoreDetails, "details")
    assert any("'claimz' is not in ScoreDetails" in p for p in found)
    assert any("details.claims" in p for p in found)  # neither an int nor a list of ClaimCheck
    assert any("details.irrelevant_contexts[0]" in p for p in found)
    # a nested shape's required key missing; its NotRequired one (in_answer) may be left out
    assert typed_dict_problems({"reference_claims": [{"claim": "a"}]}, ScoreDetails, "d") == [
        "d.reference_claims[0]: ReferenceClaim needs 'attributed'"]


@pytest.fixture(scope="module")
def local_judge() -> LocalJudge:
    return LocalJudge()


def test_the_local_judges_details_have_the_declared_shape(local_judge):
    trace, cites = local_eval.trace, local_eval.CITES
    everything = EvalRequest(reference=local_eval.REFERENCE, citation_pattern=cites, expect_abstention=True)
    answers = [
        "The Eiffel Tower is 330 metres tall [1]. It was completed in 1889 [2].",
        "The Eiffel Tower is 450 metres tall [kb-9]. It was completed in 1925.",  # contradicted, unknown key
        "I don't know.",
        "Bananas are a yellow fruit rich in potassium.",
    ]
    seen: set[str] = set()
    for answer in answers:
        seen |= assert_shaped(local_judge.score_eval_sync(trace(answer), everything))
    seen |= assert_shaped(local_judge.score_eval_sync(trace(answers[0], contexts=[]), everything))
    seen |= assert_shaped(local_judge.score_eval_sync(trace(answers[0]), EvalRequest(reference=" ")))
    seen |= assert_shaped(local_judge.score_sync(local_eval.QUESTION, ["x"] * 51, answers[0]))
    # the samples reach the local judge's keys, so a key it stops writing leaves the shape stale here
    assert {"claims", "claim_verdicts", "contradicted_claims", "reader", "reason", "contexts_ignored",
            "context_relevance", "irrelevant_contexts", "answer_relevancy_features", "reference_claims",
            "answer_correctness_counts", "claims_not_in_reference", "citations", "unknown_citations",
            "citation_precision", "reference_reason", "abstention_phrase"} <= seen


async def test_the_llm_judges_details_have_the_declared_shape(server, make_judge):
    trace, request = llm_eval.trace, EvalRequest(reference=llm_eval.REFERENCE, citation_pattern=llm_eval.CITES,
                                                 expect_abstention=True)
    judge = make_judge()
    seen = assert_shaped(await judge.score(trace()))
    seen |= assert_shaped(await judge.score_for_eval(trace(), request))
    seen |= assert_shaped(await judge.score_for_eval(trace(), request))  # a cache hit
    seen |= assert_shaped(await judge.score_for_eval(trace(answer="I don't know."), EvalRequest(reference=" ")))
    server.responder = llm_eval.parity_responder(
        reference_statements=["Paris is the capital of France.", "Paris has 2 million people."], recall=[1, 0],
        answer_in_reference=[1], reference_in_answer=[1, 0],
        citation_verdicts={llm_eval.CONTEXTS[0]: 1, llm_eval.CONTEXTS[2]: 0})
    parity = make_judge(mode="parity")
    seen |= assert_shaped(await parity.score_for_eval(
        trace(answer="Paris is the capital of France [1]. France is in Europe [3]."), request))
    seen |= assert_shaped(await contradictions.judged(server, None, [
        {"claim": 1, "evidence": contradictions.CONTEXTS[0].split(". ")[1], "reason": "number 49 ≠ 19"},
        {"claim": 9, "evidence": contradictions.CONTEXTS[1], "reason": "?"},
    ]))
    assert {"claims", "claim_verdicts", "supported_share", "invalid_contradictions", "context_relevant",
            "generated_questions", "noncommittal", "reference_claims", "claims_in_reference", "citations",
            "mode", "calls", "truncated", "usage_estimated", "cached", "abstained", "reference_reason"} <= seen


def test_the_evaluators_reasons_have_the_declared_shape():
    evaluators = EvaluatorSet(parse_evaluators("evaluators:\n  - {name: no_pii, kind: regex, pattern: '\\d{3}'}\n"))
    merged, _ = evaluators.merge(llm_eval.trace(answer="Call 555 today."), Scores({}))
    assert assert_shaped(merged) == {"evaluators"}


def test_every_declared_key_is_typed():
    # a key added as Any would let any value through mypy and this test alike
    assert all(h is not Any and "Any" not in str(h) for h in typing.get_type_hints(ScoreDetails).values())
