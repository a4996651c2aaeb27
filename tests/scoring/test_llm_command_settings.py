"""The judge's timeout and concurrency reach every command that judges — ``ragmon eval``,
``calibrate``, ``alerts simulate``, ``inspect`` — as the agent's own settings (one table: the same
flag, variable, parser and default), and ``ragmon calibrate --judge llm`` against a one-slot server
(the OpenAI-protocol test server over real HTTP, queueing like llama.cpp's server with one slot)
scores every row with the default settings, or names the real cause of each failure."""

from __future__ import annotations

import asyncio
import json

import pytest

from ragmon.calibration import command as calibrate_command
from ragmon.cli import build_parser, main
from ragmon.config import settings_by_name
from ragmon.evaluation import command as eval_command
from ragmon.scoring.llm import LlmJudge
from tests.fakes.openai_server import FakeOpenAI, Reply, compact_responder

SETTINGS = ("judge_timeout_s", "judge_concurrency", "judge_max_completion_tokens")
LLM = ["--judge", "llm", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m"]
COMMANDS = {
    "eval": ["eval", "golden.jsonl", "--responses", "r.jsonl"],
    "calibrate": ["calibrate", "labels.jsonl"],
    "alerts simulate": ["alerts", "simulate", "labels.jsonl"],
    "inspect": ["inspect", "traces.json"],
}


def _actions(argv: list[str]):
    """The argparse actions of the (sub)command ``argv`` names."""
    parser = build_parser()
    for word in argv:
        sub = next((a for a in parser._actions if a.choices and isinstance(a.choices, dict) and word in a.choices),
                   None)
        if sub is None:
            break
        parser = sub.choices[word]
    return {a.dest: a for a in parser._actions}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_judging_command_takes_the_agents_flags_for_timeout_and_concurrency(command):
    actions = _actions(COMMANDS[command])
    agent = _actions(["agent"])
    for name in SETTINGS:
        setting = settings_by_name()[name]
        assert actions[name].option_strings == agent[name].option_strings == [setting.flag]
        assert actions[name].default is None  # unset: RAGMON_* and then the table's default
        assert actions[name].help == agent[name].help  # one help text, with the variable's name in it
        assert setting.env in actions[name].help


@pytest.mark.parametrize("command", ["eval", "calibrate", "alerts simulate"])
async def test_flags_then_variables_then_defaults_reach_the_llm_judge(command, monkeypatch):
    make_judge = eval_command.make_judge if command == "eval" else calibrate_command.make_judge
    monkeypatch.delenv("RAGMON_JUDGE_TIMEOUT_S", raising=False)
    monkeypatch.setenv("RAGMON_JUDGE_CONCURRENCY", "2")
    args = build_parser().parse_args(COMMANDS[command] + LLM + ["--judge-timeout-s", "300",
                                                                 "--judge-max-completion-tokens", "512"])
    judge = make_judge(args)
    try:
        assert isinstance(judge, LlmJudge)
        assert judge.settings.timeout_s == 300.0  # the flag
        assert judge.settings.max_completion_tokens == 512
        assert judge.settings.concurrency == 2  # the variable
    finally:
        await judge.aclose()
    monkeypatch.delenv("RAGMON_JUDGE_CONCURRENCY")
    judge = make_judge(build_parser().parse_args(COMMANDS[command] + LLM))
    try:
        assert judge.settings.timeout_s == settings_by_name()["judge_timeout_s"].default  # the table's default
        assert judge.settings.concurrency == settings_by_name()["judge_concurrency"].default
        assert judge.settings.max_completion_tokens == settings_by_name()["judge_max_completion_tokens"].default
    finally:
        await judge.aclose()
    if command != "eval":
        args = build_parser().parse_args(COMMANDS[command] + ["--judge-concurrency", "3"])
        assert calibrate_command.rows_at_once(args) == 3  # rows scored at once


def test_a_bad_value_is_refused_naming_the_setting(tmp_path, capsys):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"id": "r", "question": "q", "contexts": ["c"], "answer": "a",
                                  "labels": {"faithful": 1}}) + "\n")
    assert main(["calibrate", str(labels), "--judge-concurrency", "0", "--no-progress"]) == 2
    assert "--judge-concurrency / RAGMON_JUDGE_CONCURRENCY: invalid value '0'" in capsys.readouterr().err


def _rows(n: int) -> list[str]:
    facts = ["The Eiffel Tower is 330 metres tall.", "Savings accounts pay 2.5% interest per year.",
             "The museum opens at 9 am on weekdays."]
    return [json.dumps({"id": f"r{i}", "question": f"Question {i}?", "contexts": [facts[i % 3]],
                        "answer": facts[i % 3] if i % 2 else facts[(i + 1) % 3],
                        "labels": {"faithful": i % 2}}) for i in range(n)]


async def test_calibrate_scores_every_row_against_a_one_slot_server_with_default_settings(tmp_path, monkeypatch):
    # 12 rows, 4 at once (the default), on a server that works on one request at a time: 0.4 s each,
    # with the request timeout scaled down to 1 s (the real server took 20-51 s of a 60 s timeout).
    # Sent 4 at once, the third and fourth requests of every round would time out in the server's queue.
    for name in ("RAGMON_JUDGE_CONCURRENCY", "RAGMON_JUDGE_API_KEY", "RAGMON_JUDGE_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGMON_JUDGE_EMBEDDING_MODEL", "e")  # the test server's embeddings, not MiniLM
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(_rows(12)) + "\n")
    out = tmp_path / "report.json"
    async with FakeOpenAI() as server:
        server.slots = 1
        server.responder = lambda body: Reply.slow(0.4, then=compact_responder(body))
        rc = await asyncio.to_thread(main, [
            "calibrate", str(labels), "--judge", "llm", "--judge-base-url", server.base_url, "--judge-model", "m",
            "--judge-timeout-s", "1", "--out", str(out), "--bootstrap", "20", "--no-progress"])
        most_at_once = server.max_in_flight
    report = json.loads(out.read_text())
    assert rc == 0
    assert report["rows_scored"] == 12 and report["rows_failed"] == 0 and report["failed_by_reason"] == {}
    assert most_at_once == 1  # the judge sent no more than the server could work on


async def test_calibrate_names_the_real_cause_of_each_failure(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RAGMON_JUDGE_API_KEY", raising=False)
    monkeypatch.setenv("RAGMON_JUDGE_MAX_RETRIES", "0")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(_rows(3)) + "\n")
    out = tmp_path / "report.json"
    async with FakeOpenAI() as server:
        server.responder = lambda body: Reply.slow(3.0)
        server.enqueue(Reply.error(401, message="invalid api key"))
        rc = await asyncio.to_thread(main, [
            "calibrate", str(labels), "--judge", "llm", "--judge-base-url", server.base_url, "--judge-model", "m",
            "--judge-timeout-s", "0.2", "--judge-concurrency", "1", "--out", str(out), "--bootstrap", "20",
            "--no-progress"])
    report = json.loads(out.read_text())
    assert rc == 1  # nothing scored
    assert report["failed_by_reason"] == {"http_error": 1, "timeout": 2}
    assert "HTTP 401: invalid api key" in report["failed"][0]["error"]
    assert "no reply within 0.2s" in report["failed"][1]["error"]
    printed = capsys.readouterr().out
    assert "3 failed: 1 http_error, 2 timeout" in printed and "HTTP 401: invalid api key" in printed
