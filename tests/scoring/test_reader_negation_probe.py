"""bench/reader_negation_probe.py: the positive form a negated claim is read in (the probe's premise: a premise
contradicts "not X" exactly when it entails X). Only the text transform is checked here; the reader's numbers
belong to docs/judges.md."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    return load_script(ROOT / "bench" / "reader_negation_probe.py", "reader_negation_probe")


@pytest.mark.parametrize(("claim", "positive"), [
    ("The restaurant does not offer reservations.", "The restaurant does offer reservations."),
    ("It doesn’t take cards and isn't open late.", "It does take cards and is open late."),
    ("Women cannot vote.", "Women can vote."),
    ("There is no WiFi available.", "There is WiFi available."),
    ("He has never been to Rome.", "He has been to Rome."),
    ("The shop is no longer open.", "The shop is open."),
])
def test_negations_are_removed(probe: ModuleType, claim: str, positive: str) -> None:
    assert probe.positive_form(claim) == positive


def test_a_claim_without_negation_has_no_positive_form(probe: ModuleType) -> None:
    assert probe.positive_form("Prices rose by 4 percent in May.") is None
    assert probe.positive_form("The notice was posted.") is None  # "not" inside a word is not a negation


def test_only_true_and_false_contradictions_are_compared(probe: ModuleType) -> None:
    assert probe.kind("edit-rag-negation", 2) == "one-edit negation"
    assert probe.kind("ragtruth-qa-dev", 0) == "supported RAGTruth claim"
    assert probe.kind("ragtruth-qa-dev", 1) is None  # unsupported: neither a true nor a false contradiction
    assert probe.kind("docnli-fever-test", 0) is None
