"""Token-level alignment in the local judge: MiniLM token states, soft novelty, MaxSim, and the
sentence cache that now keeps token states (bounded by bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from ragmon.quality import online_names
from ragmon.scoring.local import LocalJudge
from ragmon.scoring.local._encoder import VectorCache as _VectorCache
from ragmon.scoring.local.embedder import EMBEDDING_DIM, NO_TOKENS, Embedder, TokenStates, shared_embedder
from ragmon.scoring.local.evidence import maxsim_per_sentence, soft_novel_counts, wh_match_per_sentence

CONTEXT = [
    "The museum is open from 9 am to 6 pm every day except Monday.",
    "Tickets cost 12 euros for adults; children under 12 enter for free.",
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return shared_embedder()


def test_token_states_come_from_the_same_pass(embedder: Embedder) -> None:
    texts = ["A short one.", "A somewhat longer sentence about museum opening hours."]
    vecs, states = embedder.embed_with_tokens(texts)
    np.testing.assert_allclose(vecs, embedder.embed(texts), atol=1e-6)
    for text, st in zip(texts, states, strict=True):
        expected_ids = embedder._tokenizer.encode(text).ids[1:-1]  # without [CLS] and [SEP]
        assert st.ids.tolist() == expected_ids
        assert st.vectors.shape == (len(expected_ids), EMBEDDING_DIM)
        assert st.vectors.dtype == np.float16
        np.testing.assert_allclose(np.linalg.norm(st.vectors.astype(np.float32), axis=1), 1.0, atol=1e-2)
    # asking for vectors only returns no token states
    assert embedder.embed_with_tokens(texts, tokens=False)[1] == []


def test_soft_novelty_counts_new_content_not_paraphrase(embedder: Embedder) -> None:
    _, support = embedder.embed_with_tokens(CONTEXT)
    claims = [
        "The museum is open every day except Monday.",  # restates the context
        "Guided tours in Japanese start at the fountain behind the cathedral.",  # all new
    ]
    _, claim_states = embedder.embed_with_tokens(claims)
    restated, invented = soft_novel_counts(claim_states, support)
    assert restated == 0
    assert invented >= 4
    # nothing to support it: every content token is novel
    assert soft_novel_counts(claim_states[:1], [NO_TOKENS])[0] > 0


def test_maxsim_prefers_the_sentence_that_matches_the_question(embedder: Embedder) -> None:
    _, states = embedder.embed_with_tokens(["How much does an adult ticket cost?", *CONTEXT])
    question, sentences = states[0], states[1:]
    scores = maxsim_per_sentence(question, [*sentences, NO_TOKENS])
    assert scores[1] > scores[0]  # the ticket sentence beats the opening hours
    assert scores[2] == -1.0  # a sentence without tokens is never the best one
    assert (scores[:2] > 0).all() and (scores[:2] <= 1.0 + 1e-3).all()


def test_wh_word_match_looks_for_the_kind_of_answer(embedder: Embedder) -> None:
    sentences = [
        "The Eiffel Tower was designed by the engineering company of Gustave Eiffel.",
        "The Eiffel Tower was completed in March 1889.",
    ]
    _, states = embedder.embed_with_tokens(["When was the Eiffel Tower completed?", *sentences])
    when = wh_match_per_sentence(states[0], states[1:])
    assert when[1] > when[0]  # "when" finds "March 1889" closer than a company name
    _, yes_no = embedder.embed_with_tokens(["Is the Eiffel Tower made of iron?"])
    assert wh_match_per_sentence(yes_no[0], states[1:]).tolist() == [0.0, 0.0]  # no wh-word: neutral
    # a sentence that only repeats the question has nothing new to match
    _, same = embedder.embed_with_tokens(["When was the Eiffel Tower completed?"])
    assert wh_match_per_sentence(states[0], [same[0], NO_TOKENS]).tolist() == [0.0, -1.0]


def test_sentence_cache_is_bounded_by_bytes_and_evicts_oldest() -> None:
    state = TokenStates(np.zeros((30, EMBEDDING_DIM), np.float16), np.zeros(30, np.int64))
    vec = np.zeros(EMBEDDING_DIM, np.float32)
    per_entry = vec.nbytes + state.vectors.nbytes + state.ids.nbytes
    cache = _VectorCache(size=1000, max_bytes=5 * per_entry + 5 * 200)
    texts = [f"sentence {i}" for i in range(12)]
    cache.put_many(texts, np.stack([vec] * 12), [state] * 12)
    kept = cache.get_many(texts)
    assert [t for t, hit in zip(texts, kept, strict=True) if hit is not None] == texts[-5:]
    # re-inserting an entry does not count its bytes twice
    cache.put_many(texts[-1:], vec[None], [state])
    assert sum(hit is not None for hit in cache.get_many(texts)) == 5


def test_cached_token_states_give_the_same_scores() -> None:
    question = "How much is an adult ticket?"
    answer = "An adult ticket costs 12 euros."
    cold = LocalJudge(cache_size=0).score_sync(question, CONTEXT, answer)
    cached_judge = LocalJudge()
    cached_judge.score_sync(question, CONTEXT, answer)  # fills the sentence cache
    warm = cached_judge.score_sync(question, CONTEXT, answer)
    assert set(warm.values) == set(cold.values) == set(online_names())
    for name in online_names():
        assert warm.get(name) == pytest.approx(cold.get(name), abs=1e-6)
    assert warm.details["context_relevance"] == cold.details["context_relevance"]
