"""``ragmon demo`` and ``ragmon demo eval``: the command's flags and what it runs (the package's
module table is in ``ragmon/demo/__init__.py``).

``--summary-json PATH`` writes the final summary for scripts and CI: ``agent`` (the agent's
counters for service ``ragmon-demo``: received, sampled, scored, skipped{reason},
failed{reason}, verdicts, retrieval/pipeline P95), ``kinds`` (per injected kind: sent, scored,
mean scores, verdicts, caught, flagged, signal_below_threshold, app-side retrieval P95),
``contradiction_changes``/``contradiction_caught`` (by changed fact), ``thresholds``, ``seed``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

from .failures import DEFAULT_SHARES, FailureKind

NAME: Final = "demo"
HELP: Final = "run the embedded demo: agent + a small RAG app with injected failures"
DESCRIPTION: Final = (
    "Start the agent in-process, drive a built-in RAG app with injected failures, score it with the offline "
    "judge, and show a live summary. No Kafka, no API key."
)

__all__ = ["add_arguments", "run"]

_SHARE_FLAGS = {
    FailureKind.RETRIEVAL_MISS: ("--retrieval-miss-share", "the retriever returns articles on another topic"),
    FailureKind.CONTRADICTION: ("--contradiction-share", "the answer changes one number, name or negation"),
    FailureKind.OFF_TOPIC: ("--off-topic-share", "the answer is about another article"),
    FailureKind.SLOW_RETRIEVAL: ("--slow-retrieval-share", "the retriever sleeps 0.6-1.4 s"),
}


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port 0-65535, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=_positive_float, default=30.0, metavar="SECONDS",
                        help="how long to send traffic (default 30; Ctrl-C stops early)")
    parser.add_argument("--rate", type=_positive_float, default=5.0, metavar="RPS",
                        help="requests per second (default 5)")
    parser.add_argument("--seed", type=int, default=1, help="random seed for questions and failures (default 1)")
    parser.add_argument("--sample-rate", type=_share, default=0.8, metavar="SHARE",
                        help="share of traces the agent judges (default 0.8; latency is measured on all)")
    for kind, (flag, what) in _SHARE_FLAGS.items():
        parser.add_argument(flag, type=_share, default=DEFAULT_SHARES[kind], metavar="SHARE",
                            help=f"share of requests where {what} (default {DEFAULT_SHARES[kind]:g})")
    parser.add_argument("--slow-threshold", type=_positive_float, default=0.5, metavar="SECONDS",
                        help="a retrieval at least this slow counts as a caught slow_retrieval (default 0.5)")
    parser.add_argument("--metrics-port", type=_port, default=9464,
                        help="in-process agent: port for /metrics, /worst, /healthz (default 9464; 0 = free)")
    parser.add_argument("--receiver-port", type=_port, default=0,
                        help="in-process agent: OTLP/HTTP receiver port (default 0 = a free port)")
    parser.add_argument("--agent", choices=("inprocess", "external"), default="inprocess",
                        help="inprocess (default): start an agent here; external: send to a running one")
    parser.add_argument("--otlp-endpoint", metavar="URL",
                        help="with --agent external: OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces")
    parser.add_argument("--metrics-url", metavar="URL",
                        help="with --agent external: the agent's metrics base URL to show its counters, "
                             "e.g. http://127.0.0.1:9464")
    parser.add_argument("--linger", type=float, default=0.0, metavar="SECONDS",
                        help="in-process agent: keep /metrics and /worst up this long after the final summary "
                             "(Ctrl-C stops sooner; default 0: they stop when the demo exits)")
    parser.add_argument("--summary-json", metavar="PATH", help="also write the final summary as JSON to PATH")
    live = parser.add_mutually_exclusive_group()
    live.add_argument("--live", dest="live", action="store_true", default=None,
                      help="redraw the summary in place (default when stdout is a terminal)")
    live.add_argument("--no-live", dest="live", action="store_false",
                      help="print one progress line every 5 s instead")
    from . import offline

    sub = parser.add_subparsers(dest="demo_command", metavar="{eval}")
    offline.add_arguments(sub.add_parser(
        "eval", help="the offline half: ragmon eval on the bundled golden set, a release and a broken one",
        description="Run `ragmon eval` over the demo's bundled golden set twice: the support bot as released "
        "(the gate passes), then a broken release against it (a worse retriever, a prompt that contradicts: the "
        "gate fails), and print the Markdown report. No API key, no network. Exit 0 when the gate passed the "
        "first and failed the second.",
    ))


def run(args: argparse.Namespace) -> int:
    import logging

    if getattr(args, "demo_command", None) == "eval":
        from . import offline

        return offline.run(args)

    from .runner import DemoOptions, run_demo

    if args.agent == "external" and not args.otlp_endpoint:
        print("ragmon demo: --agent external needs --otlp-endpoint URL", file=sys.stderr)
        return 2
    shares = {kind: getattr(args, flag.lstrip("-").replace("-", "_")) for kind, (flag, _) in _SHARE_FLAGS.items()}
    if sum(shares.values()) > 1.0:
        print(f"ragmon demo: the failure shares add up to {sum(shares.values()):.2f}, more than 1",
              file=sys.stderr)
        return 2
    # Keep the live screen readable: the agent's info logs would scroll it away.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    options = DemoOptions(
        duration_s=args.duration, rate=args.rate, seed=args.seed, shares=shares,
        sample_rate=args.sample_rate, metrics_port=args.metrics_port, receiver_port=args.receiver_port,
        agent_mode=args.agent, otlp_endpoint=args.otlp_endpoint, metrics_url=args.metrics_url,
        summary_json=args.summary_json, live=args.live, slow_threshold_s=args.slow_threshold,
        linger_s=max(0.0, args.linger),
    )
    return run_demo(options)
