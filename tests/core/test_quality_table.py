"""The quality-metric table is what every room reads: Scores, diagnosis, config, generators."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ragmon import quality
from ragmon import semconv as sc
from ragmon.config import agent_settings, load_agent_config
from ragmon.scoring.metrics.diagnosis import diagnose, thresholds
from ragmon.types import Scores

REPO = Path(__file__).resolve().parents[2]


def test_names_are_unique_semconv_constants_and_alert_stems_are_camel_case() -> None:
    names = [m.name for m in quality.rows()]
    assert len(names) == len(set(names))
    constants = {v for k, v in vars(sc).items() if k.startswith("METRIC_")}
    assert set(names) <= constants
    for m in quality.rows():
        assert m.alert.replace("_", "") == m.alert and m.alert[0].isupper()
        assert 0.0 <= m.threshold <= 1.0 and 0.0 <= m.floor <= 1.0
        assert m.role in (quality.ROLE_RETRIEVAL, quality.ROLE_GROUNDING, quality.ROLE_ANSWER, quality.ROLE_NONE)
        assert not (m.online and m.needs_reference), f"{m.name}: online metrics cannot need a reference answer"


def test_scores_validate_against_the_table() -> None:
    s = Scores({sc.METRIC_FAITHFULNESS: 0.25, sc.METRIC_CONTEXT_RECALL: None}, judge="x")
    assert s.get(sc.METRIC_FAITHFULNESS) == 0.25
    assert s.get(sc.METRIC_CONTEXT_RECALL) is None
    assert s.as_dict() == {sc.METRIC_FAITHFULNESS: 0.25}
    with pytest.raises(ValueError, match="unknown quality metric 'recall@5'"):
        Scores({"recall@5": 0.5})
    for bad in (1.5, -0.1, math.nan):
        with pytest.raises(ValueError, match="not a ratio"):
            Scores({sc.METRIC_FAITHFULNESS: bad})


def test_scores_values_cannot_be_mutated_through_the_mapping() -> None:
    source = {sc.METRIC_FAITHFULNESS: 0.5}
    s = Scores(source)
    source[sc.METRIC_FAITHFULNESS] = 0.0
    assert s.get(sc.METRIC_FAITHFULNESS) == 0.5
    with pytest.raises(TypeError):
        s.values[sc.METRIC_FAITHFULNESS] = 0.1  # type: ignore[index]


def test_one_threshold_setting_per_online_metric() -> None:
    generated = {s.name for s in agent_settings() if s.name.startswith("diagnosis_") and s.name.endswith("_threshold")}
    assert generated == {f"diagnosis_{m.name}_threshold" for m in quality.online()}
    config = load_agent_config(environ={"RAGMON_DIAGNOSIS_FAITHFULNESS_THRESHOLD": "0.7"})
    limits = config.diagnosis_thresholds()
    assert limits[sc.METRIC_FAITHFULNESS] == 0.7
    assert limits[sc.METRIC_CONTEXT_RECALL] == quality.metric(sc.METRIC_CONTEXT_RECALL).threshold


@pytest.mark.parametrize(
    ("values", "verdict"),
    [
        # offline metrics take part through their role: low context recall blames retrieval ...
        ({sc.METRIC_CONTEXT_RECALL: 0.1, sc.METRIC_FAITHFULNESS: 0.9}, sc.VERDICT_RETRIEVAL),
        # ... and a wrong answer from complete contexts is generation's fault
        ({sc.METRIC_CONTEXT_RECALL: 0.9, sc.METRIC_ANSWER_CORRECTNESS: 0.1}, sc.VERDICT_GENERATION),
        # a wrong answer from incomplete contexts is retrieval's
        ({sc.METRIC_CONTEXT_RECALL: 0.1, sc.METRIC_ANSWER_CORRECTNESS: 0.1}, sc.VERDICT_RETRIEVAL),
        # citation metrics are reported, never blamed
        ({sc.METRIC_CITATION_CORRECTNESS: 0.0}, sc.VERDICT_OK),
    ],
)
def test_diagnosis_reads_roles_from_the_table(values: dict[str, float], verdict: str) -> None:
    got, reason = diagnose(Scores(values), thresholds())
    assert got == verdict, reason


def test_thresholds_reject_unknown_metrics() -> None:
    assert thresholds({sc.METRIC_FAITHFULNESS: 0.6})[sc.METRIC_FAITHFULNESS] == 0.6
    with pytest.raises(ValueError, match="unknown metric"):
        thresholds({"faithfulnes": 0.6})


def test_rule_generator_reads_the_table_without_the_ragmon_package() -> None:
    # from a bare checkout: a private copy of quality.py, the ragmon package never imported
    probe = ("import runpy, sys; g = runpy.run_path(sys.argv[1]); "
             "print(','.join(m.name for m in g['quality_metrics']()), 'ragmon' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(REPO / "deploy/prometheus/generate_rules.py")],
                         capture_output=True, text=True, check=True, cwd=REPO / "deploy", timeout=60).stdout
    assert out.split() == [",".join(quality.online_names()), "False"]
    # in a process that imported ragmon: its own table
    spec = importlib.util.spec_from_file_location("gen_rules_probe", REPO / "deploy/prometheus/generate_rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [m.name for m in module.quality_metrics()] == list(quality.online_names())
    alerts = {rule["alert"] for group in module.rules()["groups"] for rule in group["rules"] if "alert" in rule}
    for m in quality.online():
        assert f"Ragmon{m.alert}Drop" in alerts
    # floors are off unless set: one per metric given a value
    module.FLOORS = {m.name: 0.4 for m in quality.online()}
    floored = {rule["alert"] for group in module.rules()["groups"] for rule in group["rules"] if "alert" in rule}
    assert floored - alerts == {f"Ragmon{m.alert}BelowFloor" for m in quality.online()}

