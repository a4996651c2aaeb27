"""Frozen dataclasses that cross stage boundaries.

``SpanRecord`` leaves the OTLP decoder (no protobuf object ever leaves ``ingest/``),
``RagTrace`` leaves the assembler, ``Scores`` leaves a judge (with its ``ScoreDetails``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NotRequired, TypedDict

from . import quality

# An OTLP attribute value after decoding: scalars, homogeneous lists, or kvlist -> dict.
AttrValue = Any


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One decoded span, independent of the wire encoding it came in."""

    trace_id: str  # 32 lowercase hex chars
    span_id: str  # 16 lowercase hex chars
    parent_span_id: str | None  # None for a root span
    name: str
    start_time_ns: int
    end_time_ns: int
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)
    resource: Mapping[str, AttrValue] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    status_code: str = "UNSET"  # UNSET | OK | ERROR
    status_message: str = ""
    kind: str = "INTERNAL"  # INTERNAL | SERVER | CLIENT | PRODUCER | CONSUMER
    scope_name: str = ""
    dropped_attributes_count: int = 0
    # The parent lives in another process (OTLP span flags): this span is the local root of
    # this service's part of a distributed trace (e.g. an app called through a gateway).
    parent_is_remote: bool = False

    @property
    def duration_s(self) -> float:
        return max(0, self.end_time_ns - self.start_time_ns) / 1e9

    @property
    def service_name(self) -> str | None:
        value = self.resource.get("service.name")
        return str(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class Document:
    """One retrieved document. ``content`` is None when text was not shipped."""

    id: str
    content: str | None = None
    score: float | None = None
    rank: int = 0  # 0-based position in the retriever's result list
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class RagTrace:
    """One RAG request, assembled from all spans that share a trace id."""

    trace_id: str
    service: str
    pipeline: str
    question: str | None = None
    answer: str | None = None
    documents: tuple[Document, ...] = ()
    retrieval_latency_s: float | None = None
    generation_latency_s: float | None = None
    pipeline_latency_s: float | None = None
    start_time_ns: int = 0
    error_type: str | None = None  # set when any RAG span ended in error
    complete: bool = True  # False when closed by the inactivity timeout, not by its root span
    content_sampled: bool = True  # False when the SDK left the text off (content rate)
    attribute_limit_hit: bool = False  # some span hit OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT
    span_count: int = 0
    attributes: Mapping[str, Any] = field(default_factory=dict)  # model, prompt version, feedback…

    @property
    def contexts(self) -> list[str]:
        """The texts of the retrieved documents, in rank order, skipping missing ones."""
        return [d.content for d in self.documents if d.content]

    @property
    def top_retrieval_score(self) -> float | None:
        scores = [d.score for d in self.documents if d.score is not None]
        return max(scores) if scores else None


class ClaimVerdictDetail(TypedDict):
    """One claim's verdict (``scoring/claim_verdicts.py``), texts bounded."""

    claim: str
    verdict: str  # supported | contradicted | unsupported
    evidence: str | None  # the context sentence that decides it
    reason: str | None  # e.g. "number 48 ≠ 24"; None for a supported claim


class ClaimCheck(TypedDict):
    """One claim of the answer and whether the contexts support it (the LLM judge)."""

    claim: str
    supported: bool


class ReferenceClaim(TypedDict):
    """One claim of the reference answer: in the contexts (context recall), in the answer (compact mode)."""

    claim: str
    attributed: bool
    in_answer: NotRequired[bool]


class CorrectnessCounts(TypedDict):
    """Answer correctness's claim counts: answer claims in the reference (tp) or not (fp), reference
    claims the answer leaves out (fn)."""

    tp: int
    fp: int
    fn: int


class CitationCheck(TypedDict):
    """One citation of a claim: its key, the context it names (1-based rank) and the verdict."""

    key: str
    context: int | None  # None: the key names no context
    supported: bool
    problem: NotRequired[str]  # why the key names no usable context


class CitedClaimDetail(TypedDict):
    claim: str
    citations: list[CitationCheck]
    correct: bool  # at least one context it cites supports it


class ScoreDetails(TypedDict, total=False):
    """``Scores.details``: the explanations a judge gives for error analysis (/worst, /traces/{id},
    ``ragmon eval``'s report, the judged-trace file). Every key any judge writes is named here; "local"
    is the local judge, "LLM" the LLM judge, "eval" the offline metrics of ``score_for_eval``."""

    # --- faithfulness
    # local: how many claims the answer has; LLM: each claim with its support verdict
    claims: int | list[ClaimCheck]
    claim_verdicts: list[ClaimVerdictDetail]  # both: per-claim verdicts (semconv.DETAIL_CLAIM_VERDICTS)
    contradicted_claims: int  # local: claims the contexts contradict (absent when none)
    unsupported_claims: int  # local: claims with support < 0.5
    least_supported_claim: str  # local: the weakest claim (a contradicted one first)
    least_supported_support: float  # local: its support
    least_supported_evidence: str  # local: the context sentence closest to it
    faithfulness_reason: str  # local: why the weakest claim is weak
    reader: dict[str, float]  # local with the reader: its answer-level features
    supported_share: float | None  # LLM compact: supported claims / claims, the RAGAS definition
    invalid_contradictions: int  # LLM compact: contradiction items dropped from the reply (absent when none)
    invalid_contradiction_reasons: dict[str, int]  # LLM compact: those items by reason
    # --- answer relevancy
    answer_question_cosine: float  # local: cosine of answer and question
    answer_relevancy_features: dict[str, float]  # local: the relevancy model's inputs (read by calibration)
    answer_relevancy_reason: str  # local: why relevancy is low (absent when it is not)
    generated_questions: list[str]  # LLM: the questions generated back from the answer
    noncommittal: bool  # LLM: the answer was judged evasive
    # --- context precision
    context_relevance: list[float]  # local: per-context relevance probability, in rank order
    context_relevant: list[bool]  # LLM: per-context relevance verdict, in rank order
    irrelevant_contexts: list[int]  # local: 0-based ranks of the irrelevant contexts (at most 20)
    context_precision_reason: str  # local: set when no context looks relevant
    contexts_ignored: int  # local: contexts past the per-trace limit, not judged
    reason: str  # local: one line naming the weakest metric and why (/worst)
    # --- abstention (eval; local online too when the answer declines)
    abstained: bool  # the answer declines to answer
    abstention_phrase: str  # the phrase that declines ("judged noncommittal" for the LLM's verdict)
    # --- context recall and answer correctness against the reference (eval)
    reference_reason: str  # why they are not computable (the reference has no claims)
    reference_claims: list[ReferenceClaim]  # each reference claim and where it is found
    context_recall_reason: str  # local: the first reference claim the contexts miss
    context_recall_evidence: str  # local: why it counts as missed
    answer_correctness_counts: CorrectnessCounts
    answer_reference_similarity: float  # cosine of answer and reference (correctness's semantic part)
    claims_in_reference: list[bool]  # LLM compact: per answer claim, whether the reference states it
    claims_not_in_reference: list[str]  # local: answer claims the reference does not state (at most 5)
    reference_claims_not_in_answer: list[str]  # local: reference claims the answer leaves out (at most 5)
    # --- citations (eval, both judges: scoring/metrics/citations.py)
    citation_claims: int  # claims of the answer
    cited_claims: int  # claims with at least one citation
    citation_markers: int  # markers found in the answer
    citations: list[CitedClaimDetail]  # each cited claim with its citations' verdicts
    unknown_citations: list[str]  # keys naming no context (absent when none)
    citation_precision: float  # supported citations / citations (absent when there are none)
    # --- the LLM judge's call
    mode: str  # compact | parity
    calls: int  # chat calls this trace took
    truncated: bool  # the input was cut to fit the token budget
    usage_estimated: bool  # some reply had no token usage: the counts are estimates
    cached: bool  # a cache hit (no call made)
    # --- written beside the judges
    evaluators: dict[str, str]  # declared evaluators' reasons by name (semconv.DETAIL_EVALUATORS)
    judge_problem: str  # ragmon eval: why the judge could not score the row


@dataclass(frozen=True, slots=True)
class Scores:
    """A judge's verdict on one trace: quality metric -> score in [0, 1], or None when not computable.

    Keys are validated against the quality-metric table (``ragmon.quality``); an unknown name,
    a NaN or a value outside [0, 1] raises ``ValueError`` at construction, so a judge bug shows up
    where it happens instead of as a strange series on the dashboard.
    """

    values: Mapping[str, float | None] = field(default_factory=dict)
    judge: str = ""
    details: ScoreDetails = field(default_factory=ScoreDetails)  # explanations for error analysis
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # user-declared evaluators (``ragmon.evaluators``): name -> 1.0 pass, 0.0 fail, None not judged;
    # names are checked against the evaluators file where it is loaded, values here
    custom: Mapping[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        custom: dict[str, float | None] = {}
        for name, value in self.custom.items():
            if value is not None and not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"evaluator {name} = {value!r} is not a ratio in [0, 1]")
            custom[str(name)] = None if value is None else float(value)
        object.__setattr__(self, "custom", MappingProxyType(custom))
        checked: dict[str, float | None] = {}
        for name, value in self.values.items():
            if not quality.known(name):
                raise ValueError(f"unknown quality metric {name!r}; known: {', '.join(quality.names())}")
            if value is not None:
                value = float(value)
                if not 0.0 <= value <= 1.0:  # also rejects NaN
                    raise ValueError(f"{name} = {value!r} is not a ratio in [0, 1]")
            checked[name] = value
        object.__setattr__(self, "values", MappingProxyType(checked))

    def get(self, name: str) -> float | None:
        """The score of ``name``; None when the judge did not (or could not) compute it."""
        return self.values.get(name)

    def as_dict(self) -> dict[str, float]:
        """The computed scores only (None left out), in the judge's order."""
        return {name: value for name, value in self.values.items() if value is not None}
