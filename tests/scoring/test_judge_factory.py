"""One judge factory: the agent, ``ragmon eval`` and ``ragmon calibrate`` build a judge from the same
``JudgeSettings`` section, read from the same settings table."""

from __future__ import annotations

import dataclasses

import pytest

from ragmon.config import agent_settings, load_agent_config
from ragmon.errors import ConfigError
from ragmon.scoring.factory import JudgeSettings, judge_settings, llm_settings

AGENT_ONLY = {"judge_backlog"}  # how many sampled traces wait: the agent's queue, not the judge's


def test_the_section_is_the_tables_judge_settings() -> None:
    fields = {f.name for f in dataclasses.fields(JudgeSettings)}
    assert fields == {s.name for s in agent_settings() if s.name.startswith("judge")} - AGENT_ONLY


def test_commands_and_agent_read_the_same_section() -> None:
    environ = {"RAGMON_JUDGE": "llm", "RAGMON_JUDGE_BASE_URL": "http://127.0.0.1:1/v1", "RAGMON_JUDGE_MODEL": "m",
               "RAGMON_JUDGE_MAX_RETRIES": "7", "RAGMON_JUDGE_INT8": "off", "RAGMON_RECEIVER_PORT": "1"}
    from_table = judge_settings(environ=environ)
    assert from_table == load_agent_config(environ=environ).section(JudgeSettings)
    assert (from_table.judge_max_retries, from_table.judge_int8) == (7, False)
    assert llm_settings(from_table).max_retries == 7
    # explicit arguments win over the environment, as for the agent
    assert judge_settings({"judge": "local"}, environ=environ).judge == "local"
    assert judge_settings(environ={}) == load_agent_config(environ={}).section(JudgeSettings)


def test_the_llm_judge_needs_its_endpoint_wherever_it_is_built() -> None:
    with pytest.raises(ConfigError, match="RAGMON_JUDGE_BASE_URL"):
        judge_settings({"judge": "llm"}, environ={})
    with pytest.raises(ConfigError, match="RAGMON_JUDGE_MODEL"):
        judge_settings({"judge": "llm", "judge_base_url": "http://127.0.0.1:1/v1"}, environ={})
    with pytest.raises(ConfigError, match="unknown setting"):
        judge_settings({"receiver_port": 1}, environ={})
    with pytest.raises(ConfigError, match="RAGMON_JUDGE_MAX_RETRIES"):
        judge_settings(environ={"RAGMON_JUDGE_MAX_RETRIES": "-1"})
