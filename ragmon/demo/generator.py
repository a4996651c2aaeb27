"""A deterministic template "generator": it answers with the sentences of the retrieved
articles that share the most words with the question — what a well-behaved LLM grounded
in its contexts would say, without the LLM. The same input always gives the same answer."""

from __future__ import annotations

from collections.abc import Sequence

from .text import content_tokens, sentences


class TemplateGenerator:
    def __init__(self, max_sentences: int = 2) -> None:
        self.max_sentences = max_sentences

    def answer(self, question: str, contexts: Sequence[str]) -> str:
        """Pick the ``max_sentences`` context sentences that overlap the question most, in
        reading order. Sentences of the top article win ties and one word of overlap, so the
        answer stays with the best match unless another article is clearly closer."""
        if not contexts:
            return "I could not find anything about that in the knowledge base."
        wanted = set(content_tokens(question))
        candidates: list[tuple[int, int, int, str]] = []  # (-overlap, rank, position, sentence)
        for rank, context in enumerate(contexts):
            for pos, sentence in enumerate(sentences(context)):
                overlap = len(wanted.intersection(content_tokens(sentence))) - (1 if rank else 0)
                candidates.append((-overlap, rank, pos, sentence))
        best = sorted(candidates)[: self.max_sentences]
        if best and best[0][0] >= 0:  # nothing overlaps: summarise the top article instead
            best = [c for c in candidates if c[1] == 0][: self.max_sentences]
        return " ".join(c[3] for c in sorted(best, key=lambda c: (c[1], c[2])))
