"""``ragmon agent | demo | calibrate | eval | dataset | chunking | version``.

Every agent flag is generated from ``ragmon.config.AGENT_SETTINGS`` so that flags, env
vars and the README's table cannot drift apart. Flags default to None so that the
precedence explicit flag > RAGMON_* env var > default holds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from ._version import __version__
from .config import AGENT_SETTINGS, AgentConfig, Setting, load_agent_config
from .errors import ConfigError, ModelError

log = logging.getLogger("ragmon")


def _format_default(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(value) or "(empty)"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "(empty)"
    return "(empty)" if value is None else str(value)


# `ragmon agent --help` sections: (title, env-name stems after RAGMON_), first match wins
AGENT_HELP_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("security / TLS (receiver and metrics)", ("RECEIVER_TLS_", "METRICS_TLS_", "RECEIVER_BEARER_",
                                              "METRICS_BEARER_", "INSECURE_")),
    ("source", ("AGENT_SOURCE",)),
    ("receiver (OTLP/HTTP, OTLP/gRPC)", ("RECEIVER_",)),
    ("metrics server (/metrics, /healthz, /readyz, /worst)", ("METRICS_",)),
    ("assembler and latency", ("ASSEMBLER_", "LATENCY_")),
    ("trace extraction", ("PIPELINE_", "DOC_ID_")),
    ("sampler", ("SAMPLER_",)),
    ("judge", ("JUDGE",)),
    ("diagnosis", ("DIAGNOSIS_",)),
    ("worst traces, trace inspector, judged-trace export", ("WORST_", "TRACE_", "EXPORT_")),
    ("kafka source", ("KAFKA_",)),
    ("process", ("LOG_", "SHUTDOWN_")),
)
AGENT_HELP_OTHER = "other"


def agent_help_group(setting: Setting) -> str:
    stem = setting.env.removeprefix("RAGMON_")
    for title, prefixes in AGENT_HELP_GROUPS:
        if stem.startswith(prefixes):
            return title
    return AGENT_HELP_OTHER


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    used = {agent_help_group(setting) for setting in AGENT_SETTINGS}
    titles = [title for title, _ in AGENT_HELP_GROUPS] + [AGENT_HELP_OTHER]
    groups: dict[str, Any] = {title: parser.add_argument_group(title) for title in titles if title in used}
    for setting in AGENT_SETTINGS:
        shown = "***" if setting.secret else _format_default(setting.default)
        groups[agent_help_group(setting)].add_argument(
            setting.flag,
            *setting.aliases,
            dest=setting.name,
            default=None,
            metavar=setting.metavar,
            help=f"{setting.help} [env {setting.env}; default {shown}]",
        )


def config_from_args(args: argparse.Namespace) -> AgentConfig:
    overrides = {s.name: getattr(args, s.name, None) for s in AGENT_SETTINGS}
    return load_agent_config(overrides)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


async def run_agent(config: AgentConfig) -> int:
    from .agent import Agent

    agent = Agent(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await agent.start()
    try:
        await stop.wait()
        log.info("signal received: stopping (grace %.0fs)", config.shutdown_grace_s)
    finally:
        await agent.stop()
    return 0


def _cmd_agent(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    setup_logging(config.log_level)
    return asyncio.run(run_agent(config))


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"ragmon {__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragmon", description="OpenTelemetry-native quality monitor for production RAG systems."
    )
    parser.add_argument("--version", action="version", version=f"ragmon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    agent = sub.add_parser(
        "agent",
        help="run the agent (sidecar): receive spans, score a sample, serve /metrics",
        description="Receive OpenTelemetry spans (OTLP/HTTP or Kafka), assemble RAG traces, measure "
        "latency on all of them, judge a sample, and expose Prometheus metrics. Every flag also has "
        "a RAGMON_* environment variable; an explicit flag wins over the variable.",
    )
    add_agent_arguments(agent)
    agent.set_defaults(func=_cmd_agent)

    from . import demo

    demo_parser = sub.add_parser(
        "demo", help="run the embedded demo: agent + a small RAG app with injected failures",
        description="Start the agent in-process, drive a built-in RAG app with injected failures, "
        "score it with the offline judge, and show a live summary. No Kafka, no API key.",
    )
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(func=demo.run)

    from . import calibrate

    cal = sub.add_parser(
        "calibrate", help="measure a judge against human labels (JSONL)",
        description="Score labelled rows with a judge and report agreement with the human labels.",
    )
    calibrate.add_arguments(cal)
    cal.set_defaults(func=calibrate.run)

    from .evaluation import command as eval_command

    evaluate = sub.add_parser(
        "eval", help="evaluate a RAG app against a golden set (IR metrics, judges, CI gate)",
        description="Run a golden set through your app (in-process, or recorded responses / OTLP traces), "
        "measure retrieval against the gold documents and generation with the agent's judges, compare "
        "with a baseline and gate. Exit 0 passed, 1 gate failed, 2 bad usage or input.",
    )
    eval_command.add_arguments(evaluate)
    evaluate.set_defaults(func=eval_command.run)

    from .datasets import chunking_command, dataset_command

    dataset = sub.add_parser(
        "dataset", help="build a golden set: synth (LLM) | harvest (production) | label (terminal)",
        description="Build the golden set ragmon eval reads: generate questions from a corpus, harvest judged "
        "production traces into candidates, label candidates in the terminal (docs/evaluation.md).",
    )
    dataset_command.add_arguments(dataset)
    dataset.set_defaults(func=dataset_command.run)

    chunking = sub.add_parser(
        "chunking", help="grid-search chunk size/overlap/mode against a golden set (Recall@k, NDCG@k)",
        description="Re-chunk the corpus, re-index it (BM25 or MiniLM) and evaluate every configuration "
        "against the golden set; print the table with the best row marked, write JSON and an SVG plot.",
    )
    chunking_command.add_arguments(chunking)
    chunking.set_defaults(func=chunking_command.run)

    from . import inspect as inspect_command

    inspect_parser = sub.add_parser(
        "inspect", help="show what the agent extracts from an OTLP/JSON traces file (and, optionally, judges)",
        description="Decode and assemble the traces in an OTLP/JSON file as the agent does and print, per trace, "
        "the JSON the agent serves at GET /traces/{trace_id}: question, contexts, answer, where each was read "
        "from, and with --judge local the scores and verdict.",
    )
    inspect_command.add_arguments(inspect_parser)
    inspect_parser.set_defaults(func=inspect_command.run)

    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=_cmd_version)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"ragmon: configuration error: {exc}", file=sys.stderr)
        return 2
    except ModelError as exc:
        print(f"ragmon: model error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
