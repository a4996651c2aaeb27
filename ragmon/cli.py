"""``ragmon agent | demo | calibrate | eval | dataset | chunking | inspect | version``.

Every command is written one way: a module in the package whose work it runs (``<package>/command.py``,
or ``<package>/<name>_command.py`` where a package has two) with ``NAME``, ``HELP``, ``DESCRIPTION``,
``add_arguments(parser)`` and ``run(args) -> exit code``; this module lists them (``COMMANDS``) and
turns configuration and model errors into exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Final, Protocol

from ._version import __version__
from .errors import ConfigError, ModelError

# the command modules, in the order `ragmon --help` lists them
COMMANDS: Final = (
    "ragmon.agent.command",
    "ragmon.demo.command",
    "ragmon.calibration.command",
    "ragmon.evaluation.command",
    "ragmon.datasets.dataset_command",
    "ragmon.datasets.chunking_command",
    "ragmon.evaluation.inspect_command",
    "ragmon.alerts.command",
)


class Command(Protocol):
    """What a command module provides."""

    NAME: str
    HELP: str
    DESCRIPTION: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"ragmon {__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragmon", description="OpenTelemetry-native quality monitor for production RAG systems."
    )
    parser.add_argument("--version", action="version", version=f"ragmon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for path in COMMANDS:
        command: Command = importlib.import_module(path)  # a module with the five names above
        command_parser = sub.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION)
        command.add_arguments(command_parser)
        command_parser.set_defaults(func=command.run)
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
