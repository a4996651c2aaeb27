"""Which context sentences the local judge embeds (``_analysis.sentences_to_embed``)."""

from __future__ import annotations

from ragmon.scoring.local._analysis import sentences_to_embed
from ragmon.scoring.local.claims import facts

QUESTION = "When does the museum open?"
CLAIMS = ["The museum opens at 9 am."]
CONTEXTS = [
    ["The museum opens at 9 am on weekdays.", "Parking is free for bicycles.", "It closes at 6 pm."],
    ["Bananas grow in tropical climates.", "Apples need cold winters."],  # shares no word
]


def _mask(question: str | None, claims: list[str], max_sentences: int = 4) -> list[bool]:
    flat = [s for sents in CONTEXTS for s in sents]
    question_tokens = facts(question).tokens if question else frozenset()
    mask = sentences_to_embed(CONTEXTS, [facts(s) for s in flat], question_tokens, [facts(c) for c in claims],
                              max_sentences)
    return [bool(m) for m in mask]


def test_sentences_sharing_no_word_are_not_embedded_but_every_context_keeps_one() -> None:
    # context 1: the sentence about parking shares no word with the question or the claim;
    # context 2: nothing is shared, so only its first sentence is embedded (context relevance
    # reads each context's best sentence)
    assert _mask(QUESTION, CLAIMS) == [True, False, False, True, False]


def test_everything_is_embedded_without_a_budget_or_without_words_to_match() -> None:
    assert all(_mask(QUESTION, CLAIMS, max_sentences=0))
    assert all(_mask(None, []))


def test_the_budget_keeps_the_best_matching_sentences() -> None:
    mask = _mask(QUESTION, CLAIMS, max_sentences=1)  # per context: max(1, 1 x 4 // 2) = 2
    assert mask[0] and not mask[1]
