"""A trace's local score is a function of the trace: the sentence cache saves embedding time and never
changes a result. A context sentence left out of the embedding (``sentences_to_embed``) reads as ZERO
even when an earlier trace, whose answer shared words with it, put its vector in the cache."""

from __future__ import annotations

import asyncio

import numpy as np

from ragmon.scoring.local import LocalJudge
from ragmon.types import Document, RagTrace

# Two answers about one retrieved document, as RAG traffic has them (many questions, one corpus): each
# selects other sentences of the long context to embed.
SENTENCES = [
    "The museum opens at 9 am on weekdays and at 10 am on Sundays.",
    "Its cafe serves soup and sandwiches until the museum closes.",
    "Tickets cost 12 euros for adults and nothing for children under 12.",
    "The sculpture garden was added in 1994 by the architect Renzo Piano.",
    "Guided tours in English leave from the main hall every two hours.",
    "Bicycles can be parked for free in the courtyard behind the museum.",
    "The collection holds over 4,000 paintings from the Dutch Golden Age.",
    "Photography without flash is allowed in every room except the vault.",
    "A night at the museum is held on the last Friday of each month.",
    "The museum shop sells prints, books and umbrellas.",
]
CONTEXT = " ".join(SENTENCES)


def _trace(trace_id: str, question: str, answer: str) -> RagTrace:
    return RagTrace(trace_id=trace_id, service="s", pipeline="p", question=question, answer=answer,
                    documents=(Document(id="d1", content=CONTEXT, score=0.9),))


# The kids' answer restates the ticket sentence without sharing a word with it, so its trace leaves that sentence
# out; the ticket answer, scored first, shares words with it and puts its vector in the cache.
KIDS = _trace("a" * 32, "Is a visit free for kids?", "Kids get in without paying.")
TICKETS = _trace("b" * 32, "How much do tickets cost?", "Tickets cost 12 euros for adults.")


def test_a_trace_scores_the_same_whatever_was_scored_before_it() -> None:
    async def scores() -> tuple[dict[str, float], dict[str, float]]:
        alone = (await LocalJudge(cache_size=0).score(KIDS)).as_dict()
        judge = LocalJudge()
        await judge.score(TICKETS)
        after = (await judge.score(KIDS)).as_dict()
        return alone, after

    alone, after = asyncio.run(scores())
    assert after == alone


def test_a_sentence_left_out_of_the_embedding_reads_as_zero_even_when_cached() -> None:
    judge = LocalJudge()
    encoder = judge._analyser.encoder
    encoder.encode(SENTENCES)  # every sentence cached, as after traffic that read them all
    mask = np.array([k < 3 for k in range(len(SENTENCES))])
    embedded = encoder.embed_all(["When does it open?"], ["It opens at 9 am."], SENTENCES, None, mask)
    norms = np.linalg.norm(embedded.sentence_vecs, axis=1)
    assert (norms[:3] > 0.99).all() and (norms[3:] == 0).all()
