"""``ragmon inspect FILE``: what the agent would extract from the traces in an OTLP/JSON file.

The file is read like ``ragmon eval --traces`` reads it (the Collector ``file`` exporter's JSON
lines, or one document / an array: ``evaluation/traces_file.py``), decoded by the agent's decoder
and assembled by the agent's extraction. Each trace is printed as the JSON the agent serves at
``GET /traces/{trace_id}`` (``export/inspector.py``); with ``--judge local`` it is also scored by
the offline judge and diagnosed with the default thresholds (``--judge none``, the default, only
shows the extraction). With ``--trace-id`` one object is printed, else one object per line (JSON
lines), at most ``--limit`` traces. Exit 0; 2 when the file is unreadable or holds no trace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any, Final

from .. import semconv as sc
from ..config import JUDGE_COMMAND_SETTINGS, add_setting_flags, setting_values
from ..errors import ConfigError, DecodeError
from ..export.inspector import inspect_trace
from ..ingest.decode.otlp import decode_traces_payload
from ..ingest.extract import build_rag_trace
from ..scoring.factory import add_judge_argument
from ..types import RagTrace, SpanRecord

NAME: Final = "inspect"
HELP: Final = "show what the agent extracts from an OTLP/JSON traces file (and, optionally, judges)"
DESCRIPTION: Final = (
    "Decode and assemble the traces in an OTLP/JSON file as the agent does and print, per trace, the JSON the"
    " agent serves at GET /traces/{trace_id}: question, contexts, answer, where each was read from, and with "
    "--judge local the scores and verdict."
)

__all__ = ["add_arguments", "inspect_file", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="OTLP/JSON traces (the Collector file exporter's format)")
    parser.add_argument("--trace-id", help="print only this trace (32 hex characters)")
    add_judge_argument(parser, default="none", allow_none=True, endpoint=False,
                       help="score each RAG trace with an offline judge, or none (extraction only)")
    parser.add_argument("--max-chars", type=int, default=2000, help="cut each text to this many characters")
    parser.add_argument("--limit", type=int, default=100, help="print at most this many traces")
    add_setting_flags(parser)  # --judge-timeout-s, --judge-concurrency: the agent's settings, for the judge


def read_traces(data: bytes) -> tuple[list[RagTrace], list[str]]:
    """Decode and assemble every trace in ``data`` (file order); problems as messages. Pure."""
    from .traces_file import file_payloads  # the same file layouts as `ragmon eval --traces`

    problems: list[str] = []
    layout_problems: list[Any] = []
    spans_by_trace: dict[str, dict[str, SpanRecord]] = {}
    for line, payload in file_payloads(data, layout_problems):
        try:
            batch = decode_traces_payload(payload, "otlp_json")
        except DecodeError as exc:
            problems.append(f"line {line}: {exc}")
            continue
        if batch.rejected_spans:
            problems.append(f"line {line}: {batch.rejected_spans} span(s) rejected: {'; '.join(batch.errors[:3])}")
        for span in batch.spans:
            spans_by_trace.setdefault(span.trace_id, {})[span.span_id] = span
    problems.extend(getattr(p, "message", str(p)) for p in layout_problems)
    traces = [build_rag_trace(list(spans.values()), complete=True) for spans in spans_by_trace.values()]
    return traces, problems


def inspect_file(data: bytes, *, judge: str = "none", trace_id: str | None = None, max_chars: int = 2000,
                 limit: int = 100, judge_options: Mapping[str, Any] | None = None,
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """The inspector's objects for the traces in ``data`` (optionally judged, with ``judge_options``:
    settings of the judge such as ``judge_timeout_s``), and any problems."""
    traces, problems = read_traces(data)
    if trace_id is not None:
        traces = [t for t in traces if t.trace_id == trace_id.strip().lower()]
    traces = traces[:max(0, limit)]
    if judge == "none":
        return [inspect_trace(t, max_chars=max_chars) for t in traces], problems
    return asyncio.run(_judged(traces, max_chars, judge, judge_options or {})), problems


async def _judged(traces: list[RagTrace], max_chars: int, judge_name: str,
                  options: Mapping[str, Any]) -> list[dict[str, Any]]:
    from ..config import load_agent_config
    from ..scoring.factory import JudgeSettings, build_judge
    from ..scoring.metrics.diagnosis import diagnose

    config = load_agent_config({**options, "judge": judge_name}, environ={})
    judge = await asyncio.to_thread(build_judge, config.section(JudgeSettings), None)
    out = []
    try:
        for trace in traces:
            if trace.attributes.get(sc.RAGMON_NOT_RAG) or not trace.content_sampled:
                reason = "not a RAG request" if trace.attributes.get(sc.RAGMON_NOT_RAG) else "no text to judge"
                out.append(inspect_trace(trace, reason=f"not judged: {reason}", max_chars=max_chars))
                continue
            scores = await judge.score(trace)
            verdict, why = diagnose(scores, config.diagnosis_thresholds())
            out.append(inspect_trace(trace, scores=dict(scores.values), verdict=verdict, reason=why,
                                     judge=scores.judge or judge.name, details=scores.details,
                                     max_chars=max_chars))
    finally:
        await judge.aclose()
    return out


def run(args: argparse.Namespace) -> int:
    try:
        with open(args.file, "rb") as f:
            data = f.read()
    except OSError as exc:
        print(f"ragmon inspect: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        options = setting_values({name: getattr(args, name, None) for name in JUDGE_COMMAND_SETTINGS})
    except ConfigError as exc:
        print(f"ragmon inspect: {exc}", file=sys.stderr)
        return 2
    objects, problems = inspect_file(data, judge=args.judge, trace_id=args.trace_id,
                                     max_chars=args.max_chars, limit=args.limit, judge_options=options)
    for problem in problems[:10]:
        print(f"ragmon inspect: {problem}", file=sys.stderr)
    if not objects:
        what = f"trace {args.trace_id}" if args.trace_id else "no trace"
        print(f"ragmon inspect: {what} found in {args.file}", file=sys.stderr)
        return 2
    if args.trace_id:
        print(json.dumps(objects[0], indent=2, ensure_ascii=False))
    else:
        for obj in objects:
            print(json.dumps(obj, ensure_ascii=False))
    return 0
