"""From the reader's probabilities to what the judge uses: each claim's verdict (with the deciding
sentence and the reader's probability as the reason) and the answer-level features the fitted
faithfulness model weighs. Pure and I/O-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..claim_verdicts import CONTRADICTED, SUPPORTED, UNSUPPORTED, ClaimVerdict
from .model import CONTRADICTED as P_CONTRADICTED
from .model import SUPPORTED as P_SUPPORTED
from .windows import Window

# A claim is contradicted when the reader puts at least this probability on "contradicted" and more
# than on "supported"; supported when "supported" holds at least SUPPORT_THRESHOLD. The contradiction
# cut is chosen on the reader's dev pairs (carved from its training sources, never the reported rows):
# at 0.9 the first reader flags 4 % of supported RAGTruth dev claims, 9 % of the kept edit originals
# and 6 % of entailed NLI pairs, and 62 % of one-edit contradictions (at 0.5: 15 % / 18 % / 24 %, 68 %).
CONTRADICTION_THRESHOLD = 0.9
SUPPORT_THRESHOLD = 0.5
# A claim whose premise window holds less than this rarity-weighted share of its content words is not
# read (the judge's own verdict stands): on the reader's RAGTruth dev fold these are fillers ("Sure!",
# "(Passage 3)", "Here is a summary"), 3 % of the claims; there the judge's verdict is as often right
# as the reader's (22 of 26 claims), the reader finds no contradiction among them, and 7 of the 294
# one-edit contradictions it flags fall under the cut, all fillers ("Here is not a summary"). At 0.2:
# 5 % of claims, 13 of 294 edits, some real ones ("Free Wi-Fi is not available" against a JSON record).
MIN_OVERLAP = 0.1


def worth_reading(window: Window, decided: bool, copied: bool = False) -> bool:
    """Whether the reader can change a claim's verdict: not when the lexical checks already decide it
    (``decided``: a changed fact, a statement about the passages), nor when it is a verbatim copy of
    part of a context sentence (``copied``: ``windows.copies``; it says what its source says), nor when
    its premise window holds too little of it to restate it (``MIN_OVERLAP``)."""
    return not decided and not copied and window.overlap >= MIN_OVERLAP


FEATURES = ("reader_min_support", "reader_mean_support", "reader_max_contradiction", "reader_unsupported_share")


@dataclass(frozen=True, slots=True)
class ClaimReading:
    """The reader's view of one claim: probabilities (supported, unsupported, contradicted) and the
    premise window it read them from."""

    probs: tuple[float, float, float]
    window: Window

    @property
    def support(self) -> float:
        return self.probs[P_SUPPORTED]

    @property
    def contradiction(self) -> float:
        return self.probs[P_CONTRADICTED]

    @property
    def contradicted(self) -> bool:
        return self.contradiction >= CONTRADICTION_THRESHOLD and self.contradiction > self.support


def readings(probs: np.ndarray, windows: Sequence[Window]) -> list[ClaimReading]:
    return [ClaimReading((float(p[0]), float(p[1]), float(p[2])), w) for p, w in zip(probs, windows, strict=True)]


def answer_features(claim_readings: Sequence[ClaimReading | None]) -> dict[str, float]:
    """The answer-level reader features over the claims it read (neutral values when it read none)."""
    read = [r for r in claim_readings if r is not None]
    if not read:
        return {"reader_min_support": 1.0, "reader_mean_support": 1.0, "reader_max_contradiction": 0.0,
                "reader_unsupported_share": 0.0}
    support = [r.support for r in read]
    return {
        "reader_min_support": min(support),
        "reader_mean_support": float(np.mean(support)),
        "reader_max_contradiction": max(r.contradiction for r in read),
        "reader_unsupported_share": sum(s < SUPPORT_THRESHOLD for s in support) / len(support),
    }


def verdict(claim: str, reading: ClaimReading, lexical_contradiction: str | None,
            lexical_evidence: str) -> ClaimVerdict:
    """supported / contradicted / unsupported for one claim.

    A contradiction the lexical checks name (a changed number, month, unit or name) stands: the
    reader is weakest on numbers. Otherwise the reader decides, citing the window sentence it read."""
    if lexical_contradiction is not None:
        return ClaimVerdict(claim, CONTRADICTED, lexical_evidence, lexical_contradiction)
    evidence = reading.window.best or None
    if reading.contradicted:
        return ClaimVerdict(claim, CONTRADICTED, evidence, f"reader: contradicted (p={reading.contradiction:.2f})")
    if reading.support >= SUPPORT_THRESHOLD:
        return ClaimVerdict(claim, SUPPORTED, evidence, None)
    return ClaimVerdict(claim, UNSUPPORTED, evidence, f"reader: not supported (p={reading.support:.2f})")
