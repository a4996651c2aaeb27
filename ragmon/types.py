"""Frozen dataclasses that cross stage boundaries.

``SpanRecord`` leaves the OTLP decoder (no protobuf object ever leaves ``ingest/``),
``RagTrace`` leaves the assembler, ``Scores`` leaves a judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .quality import BY_NAME, NAMES

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


@dataclass(frozen=True, slots=True)
class Scores:
    """A judge's verdict on one trace: quality metric -> score in [0, 1], or None when not computable.

    Keys are validated against the quality-metric table (``ragmon.quality``); an unknown name,
    a NaN or a value outside [0, 1] raises ``ValueError`` at construction, so a judge bug shows up
    where it happens instead of as a strange series on the dashboard.
    """

    values: Mapping[str, float | None] = field(default_factory=dict)
    judge: str = ""
    # Explanations for error analysis: claims and their verdicts, per-context relevance, ...
    details: Mapping[str, Any] = field(default_factory=dict)
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
            if name not in BY_NAME:
                raise ValueError(f"unknown quality metric {name!r}; known: {', '.join(NAMES)}")
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
