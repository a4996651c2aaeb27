"""Citation markers: parsing, mapping keys to contexts, pairing claims with what they cite (pure)."""

from __future__ import annotations

import pytest

from ragmon.scoring.metrics import formulas
from ragmon.scoring.metrics.citations import (
    DEFAULT_CITATION_PATTERN,
    combine,
    compile_pattern,
    details,
    parse_citations,
    strip_markers,
)
from ragmon.types import Document

DOCS = (
    Document("kb-paris", "Paris is the capital of France.", rank=0),
    Document("doc-7", "Paris has 2.1 million inhabitants.", rank=1),
    Document("3", "The Seine flows through Paris.", rank=2),
    Document("no-text", None, rank=3),
)


def test_numbers_are_ranks_and_other_keys_are_document_ids():
    cmap = parse_citations("Paris is the capital of France [1]. It has 2.1 million people [doc-7].", DOCS)
    assert [c.text for c in cmap.claims] == ["Paris is the capital of France.", "It has 2.1 million people."]
    assert [c.contexts for c in cmap.claims] == [(0,), (1,)]
    assert cmap.pairs() == [(0, 0), (1, 1)]
    assert cmap.stripped_answer == "Paris is the capital of France. It has 2.1 million people."
    assert cmap.markers == 2 and not cmap.unknown


def test_a_marker_after_the_full_stop_cites_the_sentence_before_it():
    for answer in ("Paris is the capital. [1] The Seine flows through it. [3]",
                   "Paris is the capital.[1] The Seine flows through it.[3]"):
        cmap = parse_citations(answer, DOCS)
        assert [c.text for c in cmap.claims] == ["Paris is the capital.", "The Seine flows through it."]
        assert [c.contexts for c in cmap.claims] == [(0,), (2,)]


def test_several_keys_in_one_marker_and_repeated_markers():
    cmap = parse_citations("Paris is big [1, 2][2]. The river is long [kb-paris; 3].", DOCS)
    assert cmap.claims[0].contexts == (0, 1)
    assert [c.key for c in cmap.claims[0].citations] == ["1", "2"]  # the repeated [2] counted once
    assert cmap.claims[1].contexts == (0, 2)


def test_unknown_keys_and_documents_without_text_cannot_be_correct():
    cmap = parse_citations("Paris is the capital [9]. Paris has a river [no-text]. Paris is old [wiki].", DOCS)
    assert all(c.cited for c in cmap.claims)
    assert cmap.pairs() == []  # nothing a judge could check
    problems = {c.key: c.problem for c in cmap.unknown}
    assert problems == {"9": "no such context", "no-text": "document has no text", "wiki": "no such context"}
    result = combine(cmap, {})
    assert result.correct == (False, False, False)
    info = details(cmap, {}, result)
    assert info["unknown_citations"] == ["9", "no-text", "wiki"]
    assert info["citation_precision"] == 0.0


def test_a_number_out_of_range_falls_back_to_a_document_id():
    docs = (Document("a", "Paris is the capital."), Document("42", "The Seine is a river."))
    cmap = parse_citations("The Seine is a river [42].", docs)
    assert cmap.claims[0].contexts == (1,)


def test_rank_numbering_skips_documents_without_text():
    docs = (Document("a", None), Document("b", "Paris is the capital."))
    cmap = parse_citations("Paris is the capital [1].", docs)
    assert cmap.claims[0].contexts == (0,)  # context 1 is the first one the app could have shown


def test_markdown_links_are_not_citations_and_reference_lines_are_not_claims():
    cmap = parse_citations("See [the guide](https://example.com) for Paris [1].\nSources: [1], [2]", DOCS)
    assert [c.text for c in cmap.claims] == ["See [the guide](https://example.com) for Paris."]
    assert cmap.claims[0].contexts == (0,)


def test_uncited_claims_and_claim_level_verdicts():
    cmap = parse_citations(
        "Paris is the capital of France [1]. It has 2.1 million people [1]. The Seine flows through it.", DOCS
    )
    supported = {(0, 0): True, (1, 0): False}
    result = combine(cmap, supported)
    assert result.cited == (True, True, False)
    assert result.correct == (True, False, False)
    assert formulas.citation_presence(result.n_claims, sum(result.cited)) == pytest.approx(2 / 3)
    assert formulas.citation_correctness([ok for ok, c in zip(result.correct, result.cited, strict=True) if c]) == 0.5
    assert formulas.citation_coverage(result.n_claims, sum(result.correct)) == pytest.approx(1 / 3)


def test_one_supporting_cited_context_is_enough():
    cmap = parse_citations("Paris has 2.1 million people [1][2].", DOCS)
    assert combine(cmap, {(0, 0): False, (0, 1): True}).correct == (True,)
    info = details(cmap, {(0, 0): False, (0, 1): True}, combine(cmap, {(0, 0): False, (0, 1): True}))
    assert info["citation_precision"] == 0.5  # per citation: one of two cited contexts supports it


def test_custom_pattern_and_invalid_patterns():
    cmap = parse_citations("Paris is the capital (source: doc-7).", DOCS, r"\s*\(source: ([^)]+)\)")
    assert cmap.claims[0].text == "Paris is the capital." and cmap.claims[0].contexts == (1,)
    assert strip_markers("A [1] b [x].") == "A b."
    with pytest.raises(ValueError, match="group"):
        compile_pattern(r"\[\d+\]")
    with pytest.raises(ValueError, match="invalid citation pattern"):
        compile_pattern(r"\[(")
    assert compile_pattern(None).pattern == DEFAULT_CITATION_PATTERN


def test_empty_answer_and_answer_without_markers():
    assert parse_citations("", DOCS).claims == ()
    cmap = parse_citations("Paris is the capital. It is old.", DOCS)
    assert cmap.markers == 0 and len(cmap.claims) == 2 and not cmap.cited_claims
    result = combine(cmap, {})
    assert formulas.citation_presence(result.n_claims, sum(result.cited)) == 0.0
    assert formulas.citation_correctness([]) is None  # nothing cited: not computable
    assert formulas.citation_coverage(result.n_claims, 0) == 0.0
    assert formulas.citation_presence(0, 0) is None
