"""Frozen settings for the agent: explicit argument > ``RAGMON_*`` env var > default.

Every setting is declared once in ``agent_settings()`` (``config_table.py``, with ``AgentConfig``,
both importable from here); this module loads them: a bad value fails at start-up with a
``ConfigError`` that names the setting and its env var, and the cross-field checks
(``config_checks.py``) run on the whole. Standard ``OTEL_*`` variables are left to the OpenTelemetry SDK.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from . import quality
from .config_checks import validate
from .config_table import AgentConfig, agent_settings, field_default, settings_by_name
from .config_values import Setting
from .errors import ConfigError

__all__ = [
    "JUDGE_COMMAND_SETTINGS", "AgentConfig", "add_setting_flags", "agent_settings", "load_agent_config",
    "load_section", "setting_values", "settings_by_name",
]

_Section = TypeVar("_Section")


def _convert(setting: Setting, raw: Any, origin: str) -> Any:
    if not isinstance(raw, str):
        return raw  # already typed (explicit Python argument)
    try:
        return setting.parse(raw)
    except (ValueError, TypeError) as exc:
        shown = "***" if setting.secret else repr(raw)
        raise ConfigError(
            f"{setting.flag} / {setting.env}", f"invalid value {shown} from {origin}: {exc}"
        ) from exc


def _given(setting: Setting, overrides: Mapping[str, Any] | None, env: Mapping[str, str]) -> tuple[bool, Any]:
    """(True, value) from an explicit override (None ignored) or the setting's variable; (False, None)."""
    if overrides is not None and overrides.get(setting.name) is not None:
        return True, _convert(setting, overrides[setting.name], "argument")
    if setting.env in env:
        return True, _convert(setting, env[setting.env], f"env {setting.env}")
    return False, None


def load_agent_config(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> AgentConfig:
    """Explicit ``overrides`` (None values ignored) > ``RAGMON_*`` env > defaults; validated."""
    table = agent_settings()
    unknown = set(overrides or {}) - {s.name for s in table}
    if unknown:
        raise ConfigError(", ".join(sorted(unknown)), "unknown setting")
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in table:
        given, value = _given(setting, overrides, env)
        if setting.entry is not None:  # one entry of a mapping field: the field's defaults, then this entry
            mapping, key = setting.entry
            values.setdefault(mapping, dict(field_default(mapping)))
            if given:
                values[mapping][key] = value
        elif given:
            values[setting.name] = value
    if "detect_alpha" not in values:  # the rules' level for the budget they were generated for
        values["detect_alpha"] = quality.alert_alpha(values.get("alert_pipelines", 1),
                                                     values.get("alert_budget", quality.PAGE_BUDGET_PER_30D))
    config = AgentConfig(**values)
    validate(config)
    return config


def load_section(
    cls: type[_Section], overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> _Section:
    """One stage's section straight from the settings table, without a whole ``AgentConfig``: each
    field is the setting of that name, explicit ``overrides`` (None ignored) > ``RAGMON_*`` > default.

    For commands that need one section only (``ragmon eval`` and ``calibrate``: the judge's)."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = set(overrides or {}) - set(names)
    if unknown:
        raise ConfigError(", ".join(sorted(unknown)), "unknown setting")
    env = os.environ if environ is None else environ
    values, table = {}, settings_by_name()
    for name in names:
        given, value = _given(table[name], overrides, env)
        values[name] = value if given else table[name].default
    return cls(**values)


# The settings every command that judges (``ragmon eval``, ``calibrate``, ``alerts simulate``,
# ``inspect``) takes as flags, spelled, parsed and defaulted as the agent's.
JUDGE_COMMAND_SETTINGS: tuple[str, ...] = ("judge_timeout_s", "judge_concurrency", "judge_max_completion_tokens")


def add_setting_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                      names: Sequence[str] = JUDGE_COMMAND_SETTINGS) -> None:
    """Flags for the table's settings ``names`` (``dest`` = the setting; unset: None, so
    ``RAGMON_*`` and then the default apply — read them with ``load_section`` or ``setting_values``)."""
    table = settings_by_name()
    for name in names:
        setting = table[name]
        shown = "***" if setting.secret else setting.default
        parser.add_argument(setting.flag, *setting.aliases, dest=setting.name, default=None,
                            metavar=setting.metavar, help=f"{setting.help} [env {setting.env}; default {shown}]")


def setting_values(given: Mapping[str, Any], names: Sequence[str] = JUDGE_COMMAND_SETTINGS,
                   environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings ``names``: ``given`` (None ignored) > ``RAGMON_*`` > default, parsed and checked
    as the agent does (``ConfigError`` naming the setting)."""
    env = os.environ if environ is None else environ
    out, table = {}, settings_by_name()
    for name in names:
        found, value = _given(table[name], given, env)
        out[name] = value if found else table[name].default
    return out
