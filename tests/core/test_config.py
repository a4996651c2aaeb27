import pytest

from ragmon.config import AgentConfig, agent_settings, load_agent_config
from ragmon.errors import ConfigError


def test_defaults_are_the_embedded_default():
    config = load_agent_config(environ={})
    assert config == AgentConfig()
    assert (config.receiver_host, config.receiver_port) == ("127.0.0.1", 4318)
    assert (config.metrics_host, config.metrics_port) == ("127.0.0.1", 9464)
    assert config.judge == "local" and config.source == "http"


def test_explicit_argument_beats_env_beats_default():
    env = {"RAGMON_RECEIVER_PORT": "5000", "RAGMON_SAMPLER_RATE": "0.25"}
    config = load_agent_config({"receiver_port": "6000"}, environ=env)
    assert config.receiver_port == 6000
    assert config.sample_rate == 0.25
    assert config.metrics_port == 9464


@pytest.mark.parametrize(
    ("env", "value", "needle"),
    [
        ("RAGMON_RECEIVER_PORT", "70000", "RAGMON_RECEIVER_PORT"),
        ("RAGMON_SAMPLER_RATE", "1.5", "RAGMON_SAMPLER_RATE"),
        ("RAGMON_JUDGE", "gpt", "RAGMON_JUDGE"),
        ("RAGMON_SAMPLER_PIPELINE_RATES", "checkout", "RAGMON_SAMPLER_PIPELINE_RATES"),
        ("RAGMON_JUDGE_CONCURRENCY", "0", "RAGMON_JUDGE_CONCURRENCY"),
    ],
)
def test_bad_values_fail_fast_naming_the_setting(env, value, needle):
    with pytest.raises(ConfigError) as info:
        load_agent_config(environ={env: value})
    assert needle in str(info.value)


def test_secret_values_are_not_echoed_in_errors_or_redacted_dump():
    config = load_agent_config({"judge_api_key": "sk-secret-123"}, environ={})
    assert "sk-secret-123" not in str(config.redacted())


def test_llm_judge_requires_url_and_model():
    with pytest.raises(ConfigError, match="RAGMON_JUDGE_BASE_URL"):
        load_agent_config({"judge": "llm"}, environ={})
    config = load_agent_config(
        {"judge": "llm", "judge_base_url": "http://127.0.0.1:1/v1", "judge_model": "m"}, environ={}
    )
    assert config.judge == "llm"


def test_pipeline_rates_and_csv_parse():
    config = load_agent_config(
        environ={"RAGMON_SAMPLER_PIPELINE_RATES": "checkout=0.05, search=0.5", "RAGMON_KAFKA_TOPICS": "a, b"}
    )
    assert dict(config.pipeline_sample_rates) == {"checkout": 0.05, "search": 0.5}
    assert config.kafka_topics == ("a", "b")


def test_every_setting_has_a_ragmon_env_var_and_help():
    names = set(AgentConfig.__dataclass_fields__)
    # every field is a setting, or a mapping whose every entry is one (diagnosis thresholds)
    assert {s.entry[0] if s.entry else s.name for s in agent_settings()} == names
    for s in agent_settings():
        assert s.env.startswith("RAGMON_") and s.env.upper() == s.env
        assert s.help


def test_flags_are_spelled_like_their_environment_variables_and_old_flags_still_work():
    import argparse

    from ragmon.agent.command import add_arguments as add_agent_arguments
    from ragmon.agent.command import config_from_args
    from ragmon.config import agent_settings

    for setting in agent_settings():
        assert setting.env == "RAGMON_" + setting.flag.removeprefix("--").replace("-", "_").upper()
    parser = argparse.ArgumentParser()
    add_agent_arguments(parser)
    new = config_from_args(parser.parse_args(["--sampler-rate", "0.25", "--agent-source", "kafka"]))
    old = config_from_args(parser.parse_args(["--sample-rate", "0.25", "--source", "kafka"]))
    assert new.sample_rate == old.sample_rate == 0.25
    assert new.source == old.source == "kafka"


def test_one_boolean_parser_for_agent_and_sdk(monkeypatch):
    from ragmon import env
    from ragmon.config_values import parse_bool
    from ragmon.sdk import _runtime

    assert parse_bool is env.parse_bool
    for text, expected in (("Yes", True), (" off ", False), ("1", True)):
        monkeypatch.setenv(env.SDK_ENABLED, text)
        assert _runtime.env_bool(env.SDK_ENABLED, not expected) is expected
    monkeypatch.setenv(env.SDK_ENABLED, "maybe")
    assert _runtime.env_bool(env.SDK_ENABLED, True) is True  # the SDK logs and keeps its default


def test_llm_judge_settings_come_from_the_judge_settings_in_one_place():
    from ragmon.scoring.factory import JudgeSettings, llm_settings

    config = load_agent_config({"judge": "llm", "judge_base_url": "http://127.0.0.1:1/v1", "judge_model": "m",
                                "judge_api_key": "sk-secret", "judge_max_retries": "2", "judge_concurrency": "3"},
                               environ={})
    settings = llm_settings(config.section(JudgeSettings))
    assert (settings.base_url, settings.model, settings.max_retries, settings.concurrency) == (
        "http://127.0.0.1:1/v1", "m", 2, 3)
    assert settings.backoff_base_s == 0.5  # not an agent setting: the judge's own default
    assert "sk-secret" not in repr(settings)
