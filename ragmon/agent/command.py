"""``ragmon agent``: run the agent (sidecar). Every flag is generated from the settings table
(``ragmon.config.agent_settings()``: flag, ``RAGMON_*`` variable, metavar and help declared once), so
flags, variables and the README's table cannot drift apart. Flags default to None so that the
precedence explicit flag > ``RAGMON_*`` variable > default holds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any, Final

from ..config import AgentConfig, agent_settings, load_agent_config
from ..config_values import Setting
from .agent import Agent

NAME: Final = "agent"
HELP: Final = "run the agent (sidecar): receive spans, score a sample, serve /metrics"
DESCRIPTION: Final = (
    "Receive OpenTelemetry spans (OTLP/HTTP or Kafka), assemble RAG traces, measure latency on all of them, "
    "judge a sample, and expose Prometheus metrics. Every flag also has a RAGMON_* environment variable; an "
    "explicit flag wins over the variable."
)

log = logging.getLogger("ragmon")


def format_default(value: object) -> str:
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
    ("diagnosis and evaluators", ("DIAGNOSIS_", "EVALUATORS")),
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    table = agent_settings()
    used = {agent_help_group(setting) for setting in table}
    titles = [title for title, _ in AGENT_HELP_GROUPS] + [AGENT_HELP_OTHER]
    groups: dict[str, Any] = {title: parser.add_argument_group(title) for title in titles if title in used}
    for setting in table:
        shown = "***" if setting.secret else format_default(setting.default)
        groups[agent_help_group(setting)].add_argument(
            setting.flag,
            *setting.aliases,
            dest=setting.name,
            default=None,
            metavar=setting.metavar,
            help=f"{setting.help} [env {setting.env}; default {shown}]",
        )


def config_from_args(args: argparse.Namespace) -> AgentConfig:
    overrides = {s.name: getattr(args, s.name, None) for s in agent_settings()}
    return load_agent_config(overrides)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


async def run_agent(config: AgentConfig) -> int:
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


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    setup_logging(config.log_level)
    return asyncio.run(run_agent(config))
