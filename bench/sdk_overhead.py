"""Per-call cost of ragmon's decorators, side by side with the same pipeline undecorated and
with hand-written OpenTelemetry spans carrying similar attributes.

The pipeline: pipeline -> retriever (5 documents) -> generator, the work itself trivial so that
only the instrumentation is measured. All variants use one SDK TracerProvider with a
SimpleSpanProcessor over a no-op exporter (span creation, attributes and the processor call are
measured; no I/O). Variants run interleaved in every repeat; we report medians.

    python bench/sdk_overhead.py                 # print the table
    python bench/sdk_overhead.py --write         # also update "## SDK overhead" in docs/benchmarks.md

The goal (issue 2): ragmon's added cost at most 2x the added cost of bare OpenTelemetry spans.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import ragmon
from ragmon import semconv as sc

SECTION = "## SDK overhead"
DOCS_FILE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
QUESTION = "How long does a refund take for an order paid by card?"
DOCUMENTS = [
    {"id": f"kb-{i}", "text": f"Refund policy paragraph {i}: card refunds are processed within 5 business days. " * 4,
     "score": 0.9 - i * 0.1}
    for i in range(5)
]
ANSWER = "Card refunds are processed within 5 business days."


class NoopExporter(SpanExporter):
    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


# --- the work ----------------------------------------------------------------------------------------
def search_impl(query: str) -> list[dict[str, Any]]:
    return DOCUMENTS


def generate_impl(query: str, docs: list[dict[str, Any]]) -> str:
    return ANSWER


def plain_rag(query: str) -> str:
    return generate_impl(query, search_impl(query))


# --- bare OpenTelemetry -------------------------------------------------------------------------------
def make_otel_rag(provider: TracerProvider) -> Callable[[str], str]:
    tracer = provider.get_tracer("bench.bare")

    def otel_rag(query: str) -> str:
        with tracer.start_as_current_span("rag", attributes={sc.SPAN_KIND: sc.KIND_CHAIN,
                                                              sc.INPUT_VALUE: query}) as root:
            with tracer.start_as_current_span("search", attributes={sc.SPAN_KIND: sc.KIND_RETRIEVER,
                                                                     sc.INPUT_VALUE: query}) as span:
                docs = search_impl(query)
                attrs: dict[str, Any] = {}
                for i, doc in enumerate(docs):
                    attrs[f"retrieval.documents.{i}.document.id"] = doc["id"]
                    attrs[f"retrieval.documents.{i}.document.content"] = doc["text"]
                    attrs[f"retrieval.documents.{i}.document.score"] = doc["score"]
                span.set_attributes(attrs)
            with tracer.start_as_current_span("generate", attributes={sc.SPAN_KIND: sc.KIND_LLM,
                                                                       sc.INPUT_VALUE: query}) as span:
                answer = generate_impl(query, docs)
                span.set_attribute(sc.OUTPUT_VALUE, answer)
            root.set_attribute(sc.OUTPUT_VALUE, answer)
            return answer

    return otel_rag


# --- ragmon -------------------------------------------------------------------------------------------
@ragmon.retriever
def search(query: str) -> list[dict[str, Any]]:
    return search_impl(query)


@ragmon.generator
def generate(query: str, docs: list[dict[str, Any]]) -> str:
    return generate_impl(query, docs)


@ragmon.pipeline
def ragmon_rag(query: str) -> str:
    return generate(query, search(query))


# --- measurement ---------------------------------------------------------------------------------------
def per_call_us(fn: Callable[[str], str], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(QUESTION)
    return (time.perf_counter() - start) / calls * 1e6


def measure(calls: int, repeats: int, content_rate: float) -> dict[str, float]:
    provider = TracerProvider(shutdown_on_exit=False)
    exporter = NoopExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel_rag = make_otel_rag(provider)

    def with_rate(rate: float) -> None:
        ragmon.init(tracer_provider=provider, exporter="none", content_rate=rate)

    variants: dict[str, tuple[Callable[[str], str], float | None]] = {
        "undecorated": (plain_rag, None),
        "bare OpenTelemetry spans": (otel_rag, None),
        "ragmon decorators": (ragmon_rag, 1.0),
        "ragmon decorators, content_rate=0": (ragmon_rag, content_rate),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for fn, rate in variants.values():  # warm-up
        if rate is not None:
            with_rate(rate)
        per_call_us(fn, max(100, calls // 10))
    gc_was_enabled = gc.isenabled()
    gc.disable()  # collector pauses would land on whichever variant happens to run
    try:
        for _ in range(repeats):
            for name, (fn, rate) in variants.items():
                if rate is not None:
                    with_rate(rate)
                samples[name].append(per_call_us(fn, calls))
            gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()
    ragmon.shutdown()
    assert exporter.spans > 0
    return {name: statistics.median(values) for name, values in samples.items()}


def table(results: dict[str, float], calls: int, repeats: int) -> str:
    plain = results["undecorated"]
    bare = results["bare OpenTelemetry spans"]
    bare_added = bare - plain
    lines = [
        "| variant (3 spans, 5 documents) | µs per call | added µs per call | added cost ÷ bare OTel's |",
        "|---|---:|---:|---:|",
    ]
    for name, value in results.items():
        added = value - plain
        ratio = "–" if name == "undecorated" else f"{added / bare_added:.2f}×"
        lines.append(f"| {name} | {value:.1f} | {added:.1f} | {ratio} |")
    ours = results["ragmon decorators"]
    verdict = "met" if (ours - plain) <= 2 * bare_added else "NOT met"
    lines += [
        "",
        f"Goal (ragmon's added cost ≤ 2× bare OpenTelemetry's): **{verdict}** "
        f"({(ours - plain) / bare_added:.2f}×).",
        "",
        f"Median of {repeats} repeats × {calls} calls, variants interleaved; GC paused while timing; "
        f"SimpleSpanProcessor over a no-op exporter. Python {platform.python_version()}, "
        f"{platform.machine()}, `python bench/sdk_overhead.py --calls {calls} --repeats {repeats}`.",
    ]
    return "\n".join(lines)


def write_section(body: str, path: Path = DOCS_FILE) -> None:
    """Replace (or append) only this benchmark's section; other sections belong to others."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    section = f"{SECTION}\n\n{body}\n"
    start = text.find(SECTION + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + (text[end:] if end >= 0 else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per variant per repeat")
    parser.add_argument("--repeats", type=int, default=9, help="repeats (the median is reported)")
    parser.add_argument("--write", action="store_true", help=f"update the section in {DOCS_FILE}")
    args = parser.parse_args(argv)
    results = measure(args.calls, args.repeats, content_rate=0.0)
    body = (
        "What `@ragmon.pipeline` / `@ragmon.retriever` / `@ragmon.generator` cost per request, "
        "next to the same functions undecorated and with hand-written OpenTelemetry spans carrying "
        "similar attributes (kind, question, 5 documents' id/content/score, answer). "
        "`bench/sdk_overhead.py`. Absolute microseconds move with machine load (the numbers below "
        "come from a shared 2-core VM); the ratios, measured side by side in one run, are the result.\n\n"
        + table(results, args.calls, args.repeats)
    )
    print(body)
    if args.write:
        write_section(body)
        print(f"\nwrote {SECTION!r} in {DOCS_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
