"""The pure feature/score functions of the local judge (no model calls)."""

from __future__ import annotations

import pytest

from ragmon.scoring.local import coefficients as coef
from ragmon.scoring.local import model as local_model
from ragmon.scoring.local.claims import facts
from ragmon.scoring.local.model import ContextEvidence, context_features, context_relevance, question_type


def _ctx(text: str, cos: float = 0.5, maxsim: float = 0.5) -> ContextEvidence:
    f = facts(text)
    return ContextEvidence(
        best_cos=cos, best_specific_cos=cos, best_focus_cos=cos, best_maxsim=maxsim, best_wh_match=0.0,
        tokens=f.tokens, numbers=f.numbers, entities=f.entities, sentences=(text,),
    )


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When was the Eiffel Tower completed?", "date"),
        ("when to use a semicolon", "other"),  # "when to" asks how, not when
        ("How many humps does a camel have?", "number"),
        ("How much did The Waterboy gross?", "number"),
        ("Who designed the tower?", "person"),
        ("Where is Cougar Town filmed?", "place"),
        ("What county is Jacksonville, Florida in?", "named"),
        ("What is a CMM machine?", "other"),
    ],
)
def test_question_type(question: str, expected: str) -> None:
    assert question_type(question) == expected


def _feature(question: str, texts: list[str], name: str) -> list[float]:
    return [f[name] for f in context_features(question, facts(question), [_ctx(t) for t in texts])]


def test_answer_type_money_and_quantities() -> None:
    money = _feature(
        "How much did The Waterboy gross?",
        ["The Waterboy is a 1998 American comedy film.", "The movie earned $161.5 million in North America."],
        "answer_type_match",
    )
    assert money == [0.0, 1.0]  # a year is not an amount of money
    count = _feature(
        "How many members are in the House of Representatives?",
        ["The House met in 1789.", "The number of voting representatives is fixed at 435."],
        "answer_type_match",
    )
    assert count == [0.0, 1.0]  # a year is not a count


def test_named_answer_needs_a_new_name() -> None:
    values = _feature(
        "What county is Jacksonville in?",
        ["Jacksonville is the largest city in the state by area.", "It is the county seat of Duval County."],
        "answer_type_match",
    )
    assert values == [0.0, 1.0]


def test_gaps_are_relative_to_the_best_context() -> None:
    q = "How tall is the tower?"
    feats = context_features(q, facts(q), [_ctx("The tower is 330 metres tall.", 0.8, 0.7),
                                           _ctx("Tickets are sold online.", 0.3, 0.4)])
    assert feats[0]["cos_gap"] == 0.0 and feats[0]["maxsim_gap"] == 0.0
    assert feats[1]["cos_gap"] == pytest.approx(-0.5) and feats[1]["maxsim_gap"] == pytest.approx(-0.3)


def test_on_topic_gate_rejects_a_trace_that_is_all_off_topic() -> None:
    # Every context is "the best of its trace" (gaps 0), but none is similar to the question:
    # only the gate can tell. The same contexts with on-topic similarity pass.
    q = "What interest rate does a savings account pay?"
    texts = ["Branch opening hours are 9 am to 5 pm.", "Report a lost card through the mobile app."]
    off = context_features(q, facts(q), [_ctx(t, cos=0.15, maxsim=0.3) for t in texts])
    on = context_features(q, facts(q), [_ctx(t, cos=0.75, maxsim=0.75) for t in texts])
    assert all(f["cos_gap"] == 0.0 for f in off)
    assert max(context_relevance(f) for f in off) < local_model.CONTEXT_RELEVANT_THRESHOLD
    assert max(context_relevance(f) for f in on) > max(context_relevance(f) for f in off)


def test_coefficients_name_only_known_features() -> None:
    # A refit that renames a feature must not silently drop it at runtime (KeyError here instead).
    q = "How tall is the tower?"
    feats = context_features(q, facts(q), [_ctx("The tower is 330 metres tall.")])[0]
    for weights in (coef.CONTEXT_WEIGHTS, coef.TOPIC_WEIGHTS):
        assert set(weights) - {"bias"} <= set(feats)
    assert set(coef.TOPIC_WEIGHTS) - {"bias"} == set(local_model.TOPIC_FEATURES)
    assert 0.0 < coef.FAITHFULNESS_THRESHOLD < 1.0 and 0.0 < coef.CONTEXT_THRESHOLD < 1.0
