"""The metric seam: an online quality metric added through the declared seams only — one row
(``quality.register``) and a judge that computes it (``judges.register``) — is accepted by
``Scores``, exported on a running agent's /metrics, diagnosed with its own threshold setting,
given alert rules by the rules generator, gated by ``ragmon eval --fail-if``, and gone again
after ``unregister`` (docs/architecture.md, "... an online quality metric")."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from ragmon import judges, quality
from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.agent.command import add_arguments, config_from_args
from ragmon.cli import main
from ragmon.config import load_agent_config, settings_by_name
from ragmon.errors import ConfigError
from ragmon.evaluation import gate
from ragmon.evaluation.command import EXIT_GATE_FAILED
from ragmon.scoring.factory import JudgeSettings
from ragmon.scoring.identity import JudgeIdentity
from ragmon.scoring.judge import CIRCUIT_CLOSED, Criterion, Judge, JudgeMetrics
from ragmon.types import RagTrace, Scores
from tests.helpers.scrape import scrape
from tests.helpers.traffic import OtlpTraffic, Request

REPO = Path(__file__).resolve().parents[2]
TOY = quality.QualityMetric(
    "answer_length_ok", "answer length", "AnswerLengthOk", quality.STAGE_GENERATION, quality.ROLE_ANSWER,
    threshold=0.5, floor=0.3, needs_reference=False, online=True, label=None,
    description="Words in the answer over ten, capped at 1: a one-word answer is too short.",
)
SHIPPED_ONLINE = (sc.METRIC_FAITHFULNESS, sc.METRIC_ANSWER_RELEVANCY, sc.METRIC_CONTEXT_PRECISION)
# the 1h, 6h, 12h and 24h windows of a month, each times its episodes on noise per disjoint window
EPISODES_PER_30D = 720 * 1.15 + 120 * 7.95 + 60 * 13.3 + 30 * 20.2
LONG_ANSWER = "The Pro plan costs 49 dollars per month and includes 10 seats."  # 12 words: 1.0


class LengthJudge:
    """Computes the toy metric only: the answer's word count over ten, capped at 1."""

    name = "toy_length"
    bounds_own_duration = False
    circuit_state = CIRCUIT_CLOSED
    identity = JudgeIdentity("toy_length", "1", sc.PROFILE_NONE)

    async def score(self, trace: RagTrace) -> Scores:
        words = len((trace.answer or "").split())
        return Scores({TOY.name: min(1.0, words / 10)}, judge=self.name)

    async def aclose(self) -> None:
        return None


def build_length(settings: JudgeSettings, metrics: JudgeMetrics | None, criteria: Sequence[Criterion]) -> Judge:
    return LengthJudge()


def _register() -> None:
    quality.register(TOY)
    judges.register(judges.JudgeSpec("toy_length", f"{__name__}:build_length", "answer length",
                                     metrics=(TOY.name,)))


def _unregister() -> None:
    judges.unregister("toy_length")
    quality.unregister(TOY.name)


@pytest.fixture
def toy() -> Iterator[quality.QualityMetric]:
    _register()
    try:
        yield TOY
    finally:
        _unregister()


def _rules_generator() -> ModuleType:
    """deploy/prometheus/generate_rules.py, loaded fresh (its z is sized from the table when loaded)."""
    spec = importlib.util.spec_from_file_location("gen_rules_seam", REPO / "deploy/prometheus/generate_rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _alerts(rules: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(group, alert, severity, window) of every alert."""
    return [(g["name"], r["alert"], r["labels"]["severity"], r["labels"].get("window", ""))
            for g in rules["groups"] for r in g["rules"] if "alert" in r]


def test_the_table_and_the_judge_registry_carry_the_toy(toy: quality.QualityMetric) -> None:
    assert quality.online_names() == (*SHIPPED_ONLINE, TOY.name)
    assert quality.metric(TOY.name) is TOY and quality.default_thresholds()[TOY.name] == 0.5
    assert judges.spec("toy_length").metrics == (TOY.name,)
    assert judges.spec("local").metrics == SHIPPED_ONLINE  # the shipped judges do not claim it
    s = Scores({TOY.name: 0.2}, judge="toy_length")
    assert s.as_dict() == {TOY.name: 0.2}
    with pytest.raises(ValueError, match="not a ratio"):
        Scores({TOY.name: 1.2})


def test_its_diagnosis_threshold_is_a_setting_with_flag_and_variable(toy: quality.QualityMetric) -> None:
    setting = settings_by_name()["diagnosis_answer_length_ok_threshold"]
    assert (setting.env, setting.flag) == ("RAGMON_DIAGNOSIS_ANSWER_LENGTH_OK_THRESHOLD",
                                           "--diagnosis-answer-length-ok-threshold")
    assert load_agent_config(environ={}).diagnosis_thresholds()[TOY.name] == 0.5  # the row's default
    by_env = load_agent_config(environ={"RAGMON_DIAGNOSIS_ANSWER_LENGTH_OK_THRESHOLD": "0.7"})
    assert by_env.diagnosis_thresholds()[TOY.name] == 0.7
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--diagnosis-answer-length-ok-threshold", "0.6"])
    assert config_from_args(args).diagnosis[TOY.name] == 0.6
    with pytest.raises(ConfigError, match="RAGMON_DIAGNOSIS_ANSWER_LENGTH_OK_THRESHOLD"):
        load_agent_config(environ={"RAGMON_DIAGNOSIS_ANSWER_LENGTH_OK_THRESHOLD": "1.5"})


async def test_a_running_agent_judges_exports_and_diagnoses_it(toy: quality.QualityMetric) -> None:
    # the agent builds its judge from the registry by name (judge=None): the shipped path
    config = load_agent_config({"judge": "toy_length", "diagnosis_answer_length_ok_threshold": 0.7,
                                "sample_rate": 1.0, "receiver_port": 0, "metrics_port": 0,
                                "trace_timeout_s": 2.0}, environ={})
    agent = Agent(config, registry=CollectorRegistry())
    await agent.start()
    try:
        traffic = OtlpTraffic(f"http://127.0.0.1:{agent.receiver_port}/v1/traces")
        contexts = ["The Pro plan costs 49 dollars per month and includes 10 seats."]
        for answer in (LONG_ANSWER, "Forty-nine dollars."):  # 1.0 passes, 0.2 fails the 0.7 threshold
            await asyncio.to_thread(traffic.send, Request(question="How much is Pro?", contexts=contexts,
                                                          answer=answer))
        assert await agent.wait_idle(20)
        s = await asyncio.to_thread(scrape, agent.metrics_port)
        traffic.close()
    finally:
        await agent.stop()
    labels = {"judge": "toy_length", "metric": TOY.name, "sample": sc.SAMPLE_STREAM_RATE}
    assert s.value(f"{sc.M_SCORE}_count", **labels) == 2
    assert s.value(f"{sc.M_SCORE}_sum", **labels) == pytest.approx(1.2)
    assert s.value(f"{sc.M_SCORE_FAILURES}_total", **labels) == 1
    assert {lab["metric"] for lab in s.labelsets(f"{sc.M_SCORE}_count")} == {TOY.name}
    # role "answer" with no retrieval metric low: the short answer is generation's fault
    assert s.value(f"{sc.M_DIAGNOSIS}_total", verdict=sc.VERDICT_GENERATION) == 1
    assert s.value(f"{sc.M_DIAGNOSIS}_total", verdict=sc.VERDICT_OK) == 1


def test_the_rules_generator_gives_it_alerts_and_sizes_z_for_it(toy: quality.QualityMetric) -> None:
    gen = _rules_generator()
    assert [m.name for m in gen.quality_metrics()] == [*SHIPPED_ONLINE, TOY.name]
    # nine tests page a window now (per online metric, four, its failing share's rise and its mean score's drop;
    # the contradiction share's rise): the agent's --alpha agrees
    assert pytest.approx(0.5 / (9 * EPISODES_PER_30D)) == gen.DROP_ALPHA
    assert load_agent_config(environ={}).detect_alpha == gen.DROP_ALPHA == quality.alert_alpha()
    toy_alerts = [a for a in _alerts(gen.rules()) if a[1].startswith("RagmonAnswerLengthOk")]
    assert sorted(toy_alerts) == sorted(
        (group, "RagmonAnswerLengthOkDrop", severity, window)
        for group, window in (("ragmon-quality", "1h"), *(("ragmon-quality-long", w) for w in ("6h", "12h", "24h")))
        for severity in ("warning", "critical"))
    drop = next(r for g in gen.rules()["groups"] for r in g["rules"] if r.get("alert") == "RagmonAnswerLengthOkDrop")
    assert 'ragmon:failing_share:rise1h{metric="answer_length_ok"} >= 0.025' in drop["expr"]
    assert "Failing answer length of" in drop["annotations"]["summary"]
    gen.FLOORS = gen.parse_floors(["answer_length_ok=0.3"], argparse.ArgumentParser())
    floors = [a for a in _alerts(gen.rules()) if a[1] == "RagmonAnswerLengthOkBelowFloor"]
    assert floors == [("ragmon-quality", "RagmonAnswerLengthOkBelowFloor", "warning", "")]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_ragmon_eval_gates_on_it(toy: quality.QualityMetric, tmp_path: Path) -> None:
    answers = (LONG_ANSWER, "Yes.", "No idea.", "See the docs.")  # 1.0, 0.1, 0.2, 0.3: mean 0.4
    golden = _write_jsonl(tmp_path / "golden.jsonl", [
        {"id": f"q{i}", "question": f"question {i}?", "ground_truth_docs": [f"g{i}"], "question_type": "factoid"}
        for i in range(len(answers))])
    responses = _write_jsonl(tmp_path / "responses.jsonl", [
        {"id": f"q{i}", "retrieved_ids": [f"g{i}"], "contexts": [f"text {i}"], "answer": answer}
        for i, answer in enumerate(answers)])
    out = tmp_path / "report.json"
    code = main(["eval", str(golden), "--responses", str(responses), "--judge", "toy_length", "--no-default-rules",
                 "--fail-if", "answer_length_ok < 0.5", "--no-progress", "--quiet", "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == EXIT_GATE_FAILED
    assert report["metrics"][TOY.name]["mean"] == pytest.approx(0.4)
    [rule] = report["gate"]["rules"]
    assert (rule["rule"], rule["status"], rule["observed"]) == ("answer_length_ok < 0.5", "failed", pytest.approx(0.4))
    # it counts in the composite (it takes part in the verdict): mrr 1.0 and 0.1 for "Yes."
    assert gate.composite_metrics()[-1] == TOY.name
    assert report["rows"][1]["metrics"][gate.COMPOSITE] == pytest.approx(0.55)


def test_unregister_takes_it_out_of_every_room() -> None:
    _register()
    _unregister()
    assert quality.online_names() == SHIPPED_ONLINE
    with pytest.raises(ValueError, match="unknown quality metric 'answer_length_ok'"):
        Scores({TOY.name: 0.5})
    assert "diagnosis_answer_length_ok_threshold" not in settings_by_name()
    with pytest.raises(ConfigError, match="unknown setting"):
        load_agent_config({"diagnosis_answer_length_ok_threshold": 0.6}, environ={})
    assert quality.alert_alpha() == pytest.approx(0.5 / (7 * EPISODES_PER_30D))
    gen = _rules_generator()
    assert [m.name for m in gen.quality_metrics()] == list(SHIPPED_ONLINE)
    assert not any("AnswerLengthOk" in a[1] for a in _alerts(gen.rules()))
    assert TOY.name not in gate.composite_metrics() and "toy_length" not in judges.names()


def test_shipped_rows_cannot_be_replaced_or_removed_and_bad_rows_are_refused() -> None:
    with pytest.raises(ValueError, match="shipped metric"):
        quality.register(quality.metric(sc.METRIC_FAITHFULNESS))
    with pytest.raises(ValueError, match="shipped metric"):
        quality.unregister(sc.METRIC_FAITHFULNESS)
    bad = quality.QualityMetric("Answer-Length", "x", "answerLength", "retrieval", "answer", 1.5, 0.5,
                                needs_reference=True, online=True, label=None, description="")
    with pytest.raises(ValueError) as refused:
        quality.register(bad)
    for why in ("lower-case", "CamelCase", "[0, 1]", "cannot need a reference"):
        assert why in str(refused.value)
    assert not quality.known("Answer-Length")
