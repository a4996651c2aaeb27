"""Frozen records that cross the evaluation wing's module boundaries.

The flow (each arrow is one module)::

    goldenset.load_golden_set(path)        -> GoldenSet (rows + RowProblem per bad line)
    runner / responses / traces_file       -> Observation per golden row (a RagTrace, or a RowProblem)
    ir.* + the judges                      -> RowResult.metrics
    stats / gate                           -> aggregates, intervals, GateResult
    report / markdown / junit / push       -> outputs

Metric names are exactly the report's keys: ``hit@1``, ``recall@5``, ``precision@5``, ``mrr``,
``ndcg@10``, ``two_hop_recall@5``, ``faithfulness``, ``context_recall``, ...
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..types import RagTrace, ScoreDetails

QUESTION_TYPES: Final = ("factoid", "summary", "multi_hop", "no_answer")
DIFFICULTIES: Final = ("easy", "medium", "hard")

# RowProblem.reason values: a bounded set, counted in the report's "problems" section.
PROBLEM_MALFORMED_ROW: Final = "malformed_row"  # eval-set line that is not a valid row
PROBLEM_DUPLICATE_ID: Final = "duplicate_id"  # a second eval-set row with an id already seen
PROBLEM_APP_ERROR: Final = "app_error"  # the user's app raised
PROBLEM_APP_TIMEOUT: Final = "app_timeout"  # the user's app exceeded --timeout
PROBLEM_NO_TRACE: Final = "no_trace"  # the app returned but produced no RAG spans
PROBLEM_MISSING_RESPONSE: Final = "missing_response"  # --responses/--traces: no entry for a golden id
PROBLEM_UNKNOWN_ID: Final = "unknown_id"  # --responses/--traces: an entry whose id is not in the golden set
PROBLEM_MALFORMED_RESPONSE: Final = "malformed_response"  # --responses line that is not a valid row
PROBLEM_JUDGE_FAILED: Final = "judge_failed"  # generation metrics could not be computed


@dataclass(frozen=True, slots=True)
class RowProblem:
    """Something wrong with one row; reported with its line number and counted, never fatal."""

    reason: str  # one of the PROBLEM_* values
    message: str  # human-readable: what is wrong
    line: int | None = None  # 1-based line in the file it came from, when there is one
    row_id: str | None = None
    source: str = ""  # which file: "evalset", "responses", "traces", "app"


@dataclass(frozen=True, slots=True)
class GoldenRow:
    """One question of the golden set."""

    id: str
    question: str
    # gold document id -> relevance grade (0-3). A plain list in the file means grade 1 each.
    # Grade 0 = judged and not relevant (kept for nDCG's ideal ranking; never a hit).
    ground_truth_docs: Mapping[str, int] = field(default_factory=dict)
    ground_truth_answer: str | None = None
    question_type: str = "factoid"
    difficulty: str | None = None
    # multi-hop: one set of acceptable document ids per hop (empty for single-hop rows)
    hops: tuple[frozenset[str], ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0

    @property
    def relevant_ids(self) -> frozenset[str]:
        """Gold ids with grade > 0."""
        return frozenset(doc for doc, grade in self.ground_truth_docs.items() if grade > 0)


@dataclass(frozen=True, slots=True)
class GoldenSet:
    rows: tuple[GoldenRow, ...]
    problems: tuple[RowProblem, ...] = ()
    path: str = ""
    # file-level notes that are not row problems, e.g. an unknown key (kept in meta) that looks
    # like a typo of a known one; the report shows them
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Observation:
    """What the system under test did for one golden row.

    ``trace`` is the RagTrace built by the agent's own extraction (``ingest.extract``) from the
    app's spans, or from a responses row / OTLP file; None when the row could not be run
    (``problem`` says why). ``retrieved_ids`` are the ids in rank order after ``--doc-id-field``
    mapping (duplicates kept: the metrics decide how to treat them).
    """

    row_id: str
    trace: RagTrace | None
    retrieved_ids: tuple[str, ...] = ()
    problem: RowProblem | None = None
    # the app's own return value, when run in-process and it returned a string (for debugging)
    app_output: str | None = None
    # --doc-id-field: retrieved documents lacking that metadata field (their own id was used)
    unmapped_doc_ids: int = 0


@dataclass(frozen=True, slots=True)
class ObservationSet:
    """What ``--responses`` / ``--traces`` yielded: one Observation per golden row (golden-set
    order), plus the problems that belong to no golden row (an unknown id, a line with no
    readable id); those are counted in the report but evaluate nothing."""

    observations: tuple[Observation, ...]
    problems: tuple[RowProblem, ...] = ()


@dataclass(frozen=True, slots=True)
class RowResult:
    """Every metric of one golden row, with the retrieval-vs-generation verdict."""

    row: GoldenRow
    observation: Observation
    metrics: Mapping[str, float | None]  # report metric name -> value (None: not computable)
    verdict: str | None = None  # semconv.VERDICTS, None when nothing could be judged
    verdict_reason: str = ""
    miss_class: str | None = None  # multi-hop: hop1_miss | hop2_miss | both_miss | None (no miss)
    details: ScoreDetails = field(default_factory=ScoreDetails)  # judge explanations, claims, citations
