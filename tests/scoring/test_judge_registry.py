"""The judge seam: a judge added through the registry alone is accepted by the settings table, the
commands' --judge choices, the factory, the identity and error-rate readers."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from typing import ClassVar

import pytest

from ragmon import judges
from ragmon import semconv as sc
from ragmon.config import load_agent_config
from ragmon.errors import ConfigError
from ragmon.scoring.error_rates import ErrorRates, error_rates_of
from ragmon.scoring.factory import JudgeSettings, add_judge_argument, build_judge, judge_settings
from ragmon.scoring.identity import JudgeIdentity, judge_identity
from ragmon.scoring.judge import CIRCUIT_CLOSED, Criterion, Judge, JudgeMetrics
from ragmon.types import Document, RagTrace, Scores


class ToyJudge:
    """Faithfulness = the share of answer words found in the contexts."""

    name = "toy"
    bounds_own_duration = False
    circuit_state = CIRCUIT_CLOSED
    identity = JudgeIdentity("toy", "1", sc.PROFILE_NONE)
    error_rates: ClassVar[dict[str, ErrorRates]] = {sc.METRIC_FAITHFULNESS: ErrorRates(0.8, 0.9, "toy")}

    async def score(self, trace: RagTrace) -> Scores:
        words = (trace.answer or "").lower().split()
        context = " ".join(trace.contexts).lower()
        share = sum(w in context for w in words) / len(words) if words else None
        return Scores({sc.METRIC_FAITHFULNESS: share}, judge=self.name)

    async def aclose(self) -> None:
        return None


def build_toy(settings: JudgeSettings, metrics: JudgeMetrics | None, criteria: Sequence[Criterion]) -> Judge:
    return ToyJudge()


@pytest.fixture
def toy() -> Iterator[judges.JudgeSpec]:
    spec = judges.register(judges.JudgeSpec("toy", f"{__name__}:build_toy", "word overlap",
                                            metrics=(sc.METRIC_FAITHFULNESS,)))
    yield spec
    judges.unregister("toy")


async def test_a_judge_added_through_the_registry_works_everywhere(toy: judges.JudgeSpec) -> None:
    assert load_agent_config({"judge": "toy"}, environ={}).judge == "toy"
    assert load_agent_config({}, environ={"RAGMON_JUDGE": "toy"}).judge == "toy"
    parser = argparse.ArgumentParser()
    add_judge_argument(parser, allow_none=True)
    assert parser.parse_args(["--judge", "toy"]).judge == "toy"
    judge = build_judge(judge_settings({"judge": "toy"}))
    trace = RagTrace(trace_id="0" * 32, service="svc", pipeline="p", question="q", answer="the sky is green",
                     documents=(Document("d1", "the sky is blue"),))
    scores = await judge.score(trace)
    assert scores.get(sc.METRIC_FAITHFULNESS) == 0.75
    assert judge_identity(judge) == JudgeIdentity("toy", "1", sc.PROFILE_NONE)
    assert error_rates_of(judge)[sc.METRIC_FAITHFULNESS].sensitivity == 0.8


def test_an_unknown_judge_is_refused_with_the_known_names() -> None:
    with pytest.raises(ConfigError, match="must be one of local, llm"):
        load_agent_config({"judge": "oracle"}, environ={})
    parser = argparse.ArgumentParser()
    add_judge_argument(parser, endpoint=False, default="none", allow_none=True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--judge", "llm"])  # a command without endpoint flags offers no endpoint judge


def test_names_are_bounded_label_values() -> None:
    for bad in ("Toy", "my-judge", "", "none"):
        with pytest.raises(ValueError):
            judges.register(judges.JudgeSpec(bad, "x:y", "bad"))
    assert judges.names()[:2] == ("local", "llm")
    assert judges.spec("llm").needs_endpoint and judges.spec("llm").judges_criteria
