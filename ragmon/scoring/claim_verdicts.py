"""Per-claim verdicts, the shape both judges explain an answer with (``Scores.details["claim_verdicts"]``).

Every claim of the answer (at most ``MAX_CLAIM_VERDICTS``, in answer order) gets ``supported``,
``contradicted`` (the contexts say otherwise: a changed number, a flipped negation, the fact pinned
on another name, another date or unit) or ``unsupported`` (the contexts do not say it), with the
context sentence that decides it and a short reason (``number 48 ≠ 24``, ``negation``,
``name: Team ≠ Business``). ``/traces/{id}``, ``/worst`` and ``ragmon eval``'s report show the
contradicted ones; the agent counts answers with at least one in ``ragmon_answers_contradicting_total``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from .. import semconv as sc
from ..types import ClaimVerdictDetail, ScoreDetails

SUPPORTED: Final = "supported"
CONTRADICTED: Final = "contradicted"
UNSUPPORTED: Final = "unsupported"
VERDICTS: Final = (SUPPORTED, CONTRADICTED, UNSUPPORTED)
MAX_CLAIM_VERDICTS: Final = 20
MAX_TEXT_CHARS: Final = 240
DETAIL_KEY: Final = sc.DETAIL_CLAIM_VERDICTS


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    claim: str
    verdict: str
    evidence: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    def as_detail(self) -> ClaimVerdictDetail:
        return {"claim": _short(self.claim), "verdict": self.verdict,
                "evidence": None if self.evidence is None else _short(self.evidence),
                "reason": None if self.reason is None else _short(self.reason)}


def as_details(verdicts: Iterable[ClaimVerdict]) -> list[ClaimVerdictDetail]:
    """The bounded ``details["claim_verdicts"]`` list."""
    return [v.as_detail() for _, v in zip(range(MAX_CLAIM_VERDICTS), verdicts, strict=False)]


def contradicted(details: ScoreDetails, limit: int = 3) -> list[ClaimVerdictDetail]:
    """The contradicted claims of a judge's details (at most ``limit``), for /worst and reports."""
    return [v.copy() for v in details.get(DETAIL_KEY, []) if v["verdict"] == CONTRADICTED][:limit]


def contradicts(details: ScoreDetails) -> bool | None:
    """True when the answer has a contradicted claim; None when the judge gave no claim verdicts."""
    items = details.get(DETAIL_KEY)
    if items is None:
        return None
    return any(v["verdict"] == CONTRADICTED for v in items)
