"""What every span reader gives, and the rules they share.

One reader per input format turns spans into ``SpanRecord``s (and, for protobuf spans of traces
outside the judging sample, ``extract.LightSpan``s):

- ``otlp_proto.py``  OTLP protobuf bytes (the OTLP/HTTP and gRPC body, the Collector's Kafka
  ``otlp_proto``), with ``proto_values.py`` for the protobuf objects of a span read in full
- ``otlp_json.py``   OTLP/JSON (the HTTP body, Kafka ``otlp_json``, ``ragmon eval``'s traces files)
- ``sdk_spans.py``   finished OpenTelemetry SDK spans, in process (``ragmon eval --app``)

``otlp.py`` is the front: media types, compression and size bounds, then the reader. The readers
agree on what a span becomes (tests/ingest compares them on real SDK spans); the limits and the id
rule they share are here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from ...types import SpanRecord
from ..extract import LightSpan

__all__ = [
    "FLAG_PARENT_IS_REMOTE",
    "KIND_NAMES",
    "MAX_ANY_VALUE_DEPTH",
    "MAX_ERROR_MESSAGES",
    "STATUS_NAMES",
    "DecodedBatch",
    "SpanBatch",
    "id_problem",
    "short_error",
]

MAX_ERROR_MESSAGES: Final = 10  # per batch: enough to diagnose, bounded for the response body
MAX_ANY_VALUE_DEPTH: Final = 32  # deeper arrays/kvlists are cut off (protobuf allows 100)
FLAG_PARENT_IS_REMOTE: Final = 0x200  # SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
STATUS_NAMES: Final = {0: "UNSET", 1: "OK", 2: "ERROR"}
# SPAN_KIND_UNSPECIFIED is treated as INTERNAL, as the OTel SDKs do.
KIND_NAMES: Final = {0: "INTERNAL", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass(frozen=True)
class DecodedBatch:
    spans: list[SpanRecord]
    rejected_spans: int = 0  # malformed spans skipped (bad id length, ...)
    errors: list[str] = field(default_factory=list)  # short messages, at most MAX_ERROR_MESSAGES


class SpanBatch(Protocol):
    """A decoded batch that may hold ``LightSpan``s (read with ``latency_only``: otlp_proto.py)."""

    @property
    def spans(self) -> Sequence[SpanRecord | LightSpan]: ...
    @property
    def rejected_spans(self) -> int: ...
    @property
    def errors(self) -> list[str]: ...


def id_problem(name: str, trace_id: bytes, span_id: bytes, parent: bytes) -> str | None:
    """Why a span's ids make it unusable (the span is rejected, its batch kept); None when they are fine."""
    label = f"span {name[:64]!r}"
    if len(trace_id) != 16 or not any(trace_id):
        return f"{label}: trace_id must be 16 non-zero bytes, got {len(trace_id)} bytes"
    if len(span_id) != 8 or not any(span_id):
        return f"{label}: span_id must be 8 non-zero bytes, got {len(span_id)} bytes"
    if parent and len(parent) != 8:
        return f"{label}: parent_span_id must be empty or 8 bytes, got {len(parent)} bytes"
    return None


def short_error(exc: BaseException, limit: int = 200) -> str:
    """An exception's message for an error list, cut to ``limit`` characters."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
