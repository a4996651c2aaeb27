"""The row type of the settings table (``ragmon.config.agent_settings()``) and its value parsers
(text -> typed value).

Each parser raises ``ValueError`` with a short reason; the loader turns it into a ``ConfigError`` that
names the setting and its variable. ``parse_bool`` is ``env.parse_bool``, the one boolean parser,
shared with the SDK. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import env, judges

Parser = Callable[[str], Any]


@dataclass(frozen=True, slots=True)
class Setting:
    """One agent setting: the ``AgentConfig`` field it fills, its ``RAGMON_*`` variable and flag, how
    its text is parsed, what ``--help`` shows (metavar, help), and where its default comes from."""

    name: str  # AgentConfig field (or, with ``entry``, the setting's own name)
    env: str  # RAGMON_* variable
    parse: Parser
    metavar: str  # what to write in --help: PORT, SECONDS, PATH, {a,b} for a choice, ...
    help: str
    make_default: Callable[[], Any]  # the AgentConfig default (a fresh object each call)
    secret: bool = False
    choices: tuple[str, ...] | None = None
    extra_aliases: tuple[str, ...] = ()  # more flags for the same setting (--within for --detect-within-s)
    entry: tuple[str, str] | None = None  # (mapping field, key): one entry of a mapping field of AgentConfig

    @property
    def flag(self) -> str:
        """The flag spelled like the variable: RAGMON_SAMPLER_RATE <-> --sampler-rate."""
        return "--" + self.env.removeprefix(env.PREFIX).lower().replace("_", "-")

    @property
    def aliases(self) -> tuple[str, ...]:
        """Older flag spelled after the setting name (--sample-rate), still accepted."""
        short = "--" + self.name.replace("_", "-")
        return (() if short == self.flag else (short,)) + self.extra_aliases

    @property
    def default(self) -> Any:
        return self.make_default()

parse_bool = env.parse_bool  # the one boolean parser, shared with the SDK


def int_at_least(minimum: int) -> Parser:
    def parse(text: str) -> int:
        value = int(str(text).strip())
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def float_in(lo: float, hi: float | None = None) -> Parser:
    def parse(text: str) -> float:
        value = float(str(text).strip())
        if value != value or value < lo or (hi is not None and value > hi):
            bound = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise ValueError(f"must be in {bound}, got {text!r}")
        return value

    return parse


def parse_port(text: str) -> int:
    value = int(str(text).strip())
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a TCP port 0-65535, got {value}")
    return value


def choice(*choices: str) -> Parser:
    def parse(text: str) -> str:
        value = str(text).strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}; got {text!r}")
        return value

    return parse


def parse_judge_name(text: str) -> str:
    """A registered judge name (``ragmon.judges``), read when the setting is parsed so a judge
    registered at run time is accepted."""
    value = str(text).strip().lower()
    if value not in judges.names():
        raise ValueError(f"must be one of {', '.join(judges.names())}; got {text!r}")
    return value


def parse_csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(text).split(",") if part.strip())


def parse_rate_map(text: str) -> Mapping[str, float]:
    """``"checkout=0.05,search=0.5"`` -> per-pipeline rates."""
    out: dict[str, float] = {}
    for item in parse_csv(text):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected name=rate pairs, got {item!r}")
        rate = float(value)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate for {name.strip()!r} must be in [0, 1], got {value}")
        out[name.strip()] = rate
    return out


def parse_rename_rules(text: str) -> Mapping[str, str]:
    """``"RetrieverQueryEngine\\..*=docs-qa;RunnableSequence=support"`` -> ordered REGEX -> NAME
    rules (``;`` or newlines between rules; the last ``=`` splits a rule; each regex compiled here)."""
    out: dict[str, str] = {}
    for item in str(text).replace("\n", ";").split(";"):
        if not item.strip():
            continue
        pattern, sep, name = item.strip().rpartition("=")
        if not sep or not pattern or not name.strip():
            raise ValueError(f"expected REGEX=NAME rules separated by ';', got {item.strip()!r}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad regex {pattern!r}: {exc}") from exc
        out[pattern] = name.strip()
    return out


_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_s(text: str) -> float:
    """``"1h"``, ``"30m"``, ``"90s"``, ``"1d"`` or plain seconds -> seconds (> 0)."""
    value = str(text).strip().lower()
    unit = _DURATION_UNITS.get(value[-1:]) if value else None
    seconds = float(value[:-1]) * unit if unit is not None else float(value)
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"must be a positive duration such as 1h, 30m or 900, got {text!r}")
    return seconds


def parse_optional_port(text: str) -> int | None:
    """A TCP port, or off ('', 'off', 'none')."""
    if str(text).strip().lower() in ("", "off", "none"):
        return None
    return parse_port(text)


def parse_str(text: str) -> str:
    return str(text)


def parse_optional_str(text: str) -> str | None:
    value = str(text).strip()
    return value or None


def parse_optional_float(text: str) -> float | None:
    value = str(text).strip()
    if not value:
        return None
    return float(value)


parse_rate = float_in(0.0, 1.0)
parse_positive_int = int_at_least(1)
parse_nonnegative_int = int_at_least(0)
parse_positive_float = float_in(1e-9)
parse_nonnegative_float = float_in(0.0)
