"""Unit tests of the demo app's pieces: corpus, BM25 retriever, template generator, failures."""

from __future__ import annotations

import random
import re

import pytest

from ragmon.demo.app import DemoRag
from ragmon.demo.corpus import load_corpus
from ragmon.demo.failures import (
    INJECTED_KINDS,
    FailureKind,
    FailureMix,
    contradict,
)
from ragmon.demo.generator import TemplateGenerator
from ragmon.demo.retriever import Bm25Retriever
from ragmon.demo.text import sentences

CORPUS = load_corpus()


@pytest.fixture(scope="module")
def retriever() -> Bm25Retriever:
    return Bm25Retriever(CORPUS)


@pytest.fixture(scope="module")
def offline_rag() -> DemoRag:
    # No SDK, no sleeps: the app logic alone.
    return DemoRag(seed=3, simulate_latency=False, instrument=False)


def test_corpus_is_a_few_dozen_articles_with_questions_that_point_at_them() -> None:
    ids = [d.id for d in CORPUS.documents]
    assert 30 <= len(ids) <= 60
    assert len(set(ids)) == len(ids)
    assert len(CORPUS.questions) >= 30
    assert {q.document_id for q in CORPUS.questions} <= set(ids)
    # concrete facts: most articles carry a number a contradiction can change
    with_numbers = [d for d in CORPUS.documents if re.search(r"\d", d.text)]
    assert len(with_numbers) >= 0.8 * len(ids)


@pytest.mark.parametrize("qa", CORPUS.questions, ids=lambda qa: qa.document_id)
def test_retriever_ranks_the_answering_article_first(retriever: Bm25Retriever, qa) -> None:  # type: ignore[no-untyped-def]
    hits = retriever.search(qa.question, k=3)
    assert [h.rank for h in hits] == [0, 1, 2]
    assert hits[0].document.id == qa.document_id
    assert hits[0].score > hits[1].score >= hits[2].score


def test_retriever_hits_have_the_shape_the_sdk_adapter_reads(retriever: Bm25Retriever) -> None:
    hit = retriever.search("What is the refund policy for annual plans?")[0].as_dict()
    assert hit["id"] == "billing-refunds"
    assert hit["content"] == CORPUS.document("billing-refunds").text
    assert isinstance(hit["score"], float)
    assert hit["metadata"] == {"title": "Refund policy", "topic": "billing"}


def test_off_topic_search_returns_articles_of_other_topics(retriever: Bm25Retriever) -> None:
    rng = random.Random(5)
    for qa in CORPUS.questions:
        right_topic = CORPUS.document(qa.document_id).topic
        hits = retriever.search_off_topic(qa.question, rng, k=3)
        assert len(hits) == 3
        assert all(h.document.topic != right_topic for h in hits), qa.question
        assert qa.document_id not in {h.document.id for h in hits}


def test_generator_is_deterministic_and_grounded(retriever: Bm25Retriever) -> None:
    gen = TemplateGenerator()
    for qa in CORPUS.questions:
        contexts = [h.document.text for h in retriever.search(qa.question)]
        first = gen.answer(qa.question, contexts)
        assert first == TemplateGenerator().answer(qa.question, list(contexts))
        context_sentences = {s for c in contexts for s in sentences(c)}
        answer_sentences = sentences(first)
        assert 1 <= len(answer_sentences) <= 2
        assert set(answer_sentences) <= context_sentences  # nothing made up
        top = set(sentences(contexts[0]))
        assert top & set(answer_sentences), "the best article must be quoted"


def test_generator_without_contexts_says_so() -> None:
    assert "could not find" in TemplateGenerator().answer("anything?", [])


def test_contradiction_changes_exactly_one_fact_in_one_sentence(retriever: Bm25Retriever) -> None:
    gen = TemplateGenerator()
    rng = random.Random(11)
    changes = set()
    for qa in CORPUS.questions:
        answer = gen.answer(qa.question, [h.document.text for h in retriever.search(qa.question)])
        for _ in range(3):
            c = contradict(answer, rng)
            assert c.text != answer
            before, after = sentences(answer), sentences(c.text)
            assert len(before) == len(after)
            differing = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
            assert len(differing) == 1, (answer, c.text)
            b, a = differing[0]
            assert c.original in b and c.replacement in a
            # a is b with one occurrence of the original text replaced, nothing else touched
            spots = [i for i in range(len(b)) if b.startswith(c.original, i)]
            assert any(a == b[:i] + c.replacement + b[i + len(c.original) :] for i in spots), (b, a)
            changes.add(c.change)
    assert changes == {"number", "name", "negation"}


def test_contradiction_examples() -> None:
    text = "Annual plans can be refunded in full within 30 days of purchase."
    numbers = {contradict(text, random.Random(s)).text for s in range(40)}
    assert any(re.search(r"within (60|90|15) days", t) for t in numbers)
    assert "Annual plans cannot be refunded in full within 30 days of purchase." in numbers
    named = contradict("SSO with SAML 2.0 is available on the Business plan only.", random.Random(2))
    assert "SAML 2.0" in named.text  # a version number is a name, not a quantity to change


def test_failure_mix_draws_the_configured_shares() -> None:
    mix = FailureMix({FailureKind.CONTRADICTION: 0.25, FailureKind.RETRIEVAL_MISS: 0.25})
    rng = random.Random(0)
    draws = [mix.pick(rng) for _ in range(4000)]
    assert abs(draws.count(FailureKind.CONTRADICTION) / 4000 - 0.25) < 0.03
    assert abs(draws.count(FailureKind.HEALTHY) / 4000 - 0.5) < 0.03
    assert FailureKind.OFF_TOPIC not in draws
    with pytest.raises(ValueError, match="more than 1"):
        FailureMix({FailureKind.CONTRADICTION: 0.7, FailureKind.OFF_TOPIC: 0.7})


def test_each_injected_failure_does_what_it_says(offline_rag: DemoRag) -> None:
    qa = next(q for q in CORPUS.questions if q.document_id == "billing-refunds")
    healthy = offline_rag.ask(qa.question, seed=1)
    assert healthy.failure is FailureKind.HEALTHY
    assert healthy.document_ids[0] == "billing-refunds"
    assert healthy.trace_id is None  # no SDK, no span

    miss = offline_rag.ask(qa.question, FailureKind.RETRIEVAL_MISS, seed=1)
    assert "billing-refunds" not in miss.document_ids
    assert all(h.document.topic != "billing" for h in miss.hits)
    assert set(sentences(miss.answer)) <= {s for h in miss.hits for s in sentences(h.document.text)}

    contra = offline_rag.ask(qa.question, FailureKind.CONTRADICTION, seed=1)
    assert contra.document_ids == healthy.document_ids
    assert contra.contradiction is not None and contra.answer == contra.contradiction.text
    assert contra.answer != healthy.answer

    off = offline_rag.ask(qa.question, FailureKind.OFF_TOPIC, seed=1)
    assert off.document_ids == healthy.document_ids
    assert off.off_topic_document is not None
    assert CORPUS.document(off.off_topic_document).topic not in {h.document.topic for h in off.hits}
    assert off.answer.startswith(sentences(CORPUS.document(off.off_topic_document).text)[0])

    slow = offline_rag.ask(qa.question, FailureKind.SLOW_RETRIEVAL, seed=1)
    assert slow.answer == healthy.answer  # only the latency is wrong (not simulated here)


def test_slow_retrieval_sleeps() -> None:
    rag = DemoRag(seed=1, simulate_latency=True, instrument=False)
    slow = rag.ask(CORPUS.questions[0].question, FailureKind.SLOW_RETRIEVAL)
    fast = rag.ask(CORPUS.questions[0].question)
    assert slow.retrieval_s >= 0.6
    assert fast.retrieval_s < 0.6


def test_same_seed_same_request(offline_rag: DemoRag) -> None:
    for kind in INJECTED_KINDS:
        a = offline_rag.ask(CORPUS.questions[4].question, kind, seed=42)
        b = offline_rag.ask(CORPUS.questions[4].question, kind, seed=42)
        assert (a.answer, a.document_ids) == (b.answer, b.document_ids)


def test_contradictions_can_be_limited_to_one_kind_of_change() -> None:
    rag = DemoRag(seed=2, simulate_latency=False, instrument=False, contradiction_changes=("number",))
    changes = [rag.ask(q.question, FailureKind.CONTRADICTION).contradiction for q in CORPUS.questions]
    numbers = [c for c in changes if c is not None and c.change == "number"]
    assert len(numbers) >= 0.6 * len(changes)  # every answer that has a quantity gets a changed number
    assert all(re.search(r"\d", c.original) and re.search(r"\d", c.replacement) for c in numbers)
    with pytest.raises(ValueError, match="contradiction_changes"):
        DemoRag(instrument=False, contradiction_changes=("typo",))
