"""The loop from production to a fitted judge, end to end: real SDK traffic -> a real agent (OTLP/HTTP,
the local judge, no profile: ragmon_judge_info says profile="none") -> its judged-trace file ->
``ragmon dataset harvest`` -> ``ragmon dataset label --mode judge`` (answers as a person would type
them, from a file) -> ``ragmon calibrate --fit`` -> ``ragmon agent --judge-profile``: the agent
reports the profile's name and its scores are the fitted judge's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

import ragmon
from ragmon.agent import Agent
from ragmon.calibration.dataset import LabelledRow, read_rows
from ragmon.cli import main
from ragmon.config import load_agent_config
from ragmon.datasets.harvest import read_judged
from ragmon.datasets.judge_label import order_candidates
from ragmon.evaluation.goldenset import load_golden_set
from ragmon.export.judged import sink_files
from ragmon.scoring.local import LocalJudge, load_profile
from ragmon.scoring.local._profile import JUDGE_VERSION
from ragmon.scoring.reader.model import READER_SHA256

PRODUCTS = ["kettle", "toaster", "blender", "grinder", "juicer", "mixer", "steamer", "fryer", "heater", "fan",
            "lamp", "scale", "iron", "radio", "clock"]
OTHER = ("Parcels leave the Leipzig warehouse every weekday at 4 pm and arrive within two business days.",
         "Gift cards are never refunded; they can be exchanged for a new card with the same balance.")

LOCAL_VERSION = f"{JUDGE_VERSION}+reader.{READER_SHA256[:12]}"  # the features and the shipped reader


def fact(n: int) -> tuple[str, int]:
    product = PRODUCTS[n % len(PRODUCTS)]
    return product, 2 + (n * 7) % 9


def kind(n: int) -> str:
    """What the app answers for request n: faithful, an invented claim, or something off the question."""
    return "off_topic" if n % 6 == 5 else "invented" if n % 3 == 1 else "faithful"


@ragmon.retriever(name="kb")
def search(question: str) -> list[dict[str, Any]]:
    n = int(question.split("#")[1].split()[0])
    product, years = fact(n)
    docs = [f"The Northwind {product} model {n} carries a warranty of {years} years covering the motor and "
            f"the switch. Claims need the original receipt.", *OTHER]
    return [{"id": f"kb-{n}-{i}", "text": text, "score": 0.9 - i / 10} for i, text in enumerate(docs)]


@ragmon.generator(name="answer", model="tmpl")
def answer(question: str, docs: list[dict[str, Any]]) -> str:
    n = int(question.split("#")[1].split()[0])
    product, years = fact(n)
    return {
        "faithful": f"The {product} model {n} has a warranty of {years} years covering the motor and the switch.",
        "invented": f"The {product} model {n} has a lifetime warranty, and a technician visits your home for "
                    f"free every spring to replace worn blades.",
        "off_topic": "Our stores in Vienna open at nine every morning and close at six on Saturdays.",
    }[kind(n)]


def send_traffic(endpoint: str, numbers: range) -> None:
    ragmon.init(service_name="shop", endpoint=endpoint, set_global=False)
    pipelines = {}
    for name in ("support", "sales"):
        @ragmon.pipeline(name=name)
        def rag(question: str) -> str:
            return answer(question, search(question))

        pipelines[name] = rag
    for n in numbers:
        product, _ = fact(n)
        pipelines["support" if n % 2 else "sales"](f"Question #{n} how long is the warranty on the {product} "
                                                   f"model {n}?")
    assert ragmon.shutdown() is True


async def run_agent(tmp_path: Path, sink: Path, numbers: range, **settings: Any) -> list[str]:
    """A real agent (local judge) fed by the SDK over OTLP/HTTP; returns its ragmon_judge_info lines."""
    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, "trace_timeout_s": 2.0, "judge": "local",
                                "export_judged": str(sink), **settings}, environ={})
    async with Agent(config, registry=CollectorRegistry()) as agent:
        await asyncio.to_thread(send_traffic, f"http://127.0.0.1:{agent.receiver_port}/v1/traces", numbers)
        assert await agent.wait_idle(120)
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"http://127.0.0.1:{agent.metrics_port}/metrics")).text
    return [line for line in text.splitlines() if line.startswith("ragmon_judge_info{")]


def typed_answers(candidates_file: Path) -> list[str]:
    """What the labeller types, candidate by candidate in the order the command offers them: the
    truth the app's templates encode (the test plays the person who reads the trace)."""
    lines = []
    for row in order_candidates(load_golden_set(candidates_file).rows):
        n = int(row.question.split("#")[1].split()[0])
        k = kind(n)
        lines += ["y" if k == "faithful" else "n", "n" if k == "off_topic" else "y", "1"]
    return lines


@pytest.mark.timeout(600)
async def test_harvest_label_fit_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sink = tmp_path / "judged.jsonl"
    info = await run_agent(tmp_path, sink, range(90))
    assert info == [f'ragmon_judge_info{{judge="local",profile="none",version="{LOCAL_VERSION}"}} 1.0']

    candidates = tmp_path / "candidates.jsonl"
    assert await asyncio.to_thread(main, ["dataset", "harvest", str(sink), "--n", "90", "--out", str(candidates)]) == 0
    assert "90 candidate(s) from 90 judged trace(s)" in capsys.readouterr().out

    # label: the first 60 now, the rest after a stop (the answers file ends: resumable)
    answers = typed_answers(candidates)
    labels = tmp_path / "labels.jsonl"
    first = tmp_path / "answers-1.txt"
    first.write_text("\n".join(answers[:180]) + "\n")
    command = ["dataset", "label", str(candidates), "--mode", "judge", "--out", str(labels)]
    assert await asyncio.to_thread(main, [*command, "--answers", str(first)]) == 0
    assert "stopped: 60 labelled, 0 skipped, 30 left" in capsys.readouterr().out
    rest = tmp_path / "answers-2.txt"
    rest.write_text("\n".join(answers[180:]) + "\n")
    assert await asyncio.to_thread(main, [*command, "--answers", str(rest)]) == 0
    assert "done: 30 labelled, 0 skipped." in capsys.readouterr().out

    rows = [r for r in read_rows(labels)]
    assert all(isinstance(r, LabelledRow) for r in rows) and len(rows) == 90  # the calibration format
    written = [json.loads(line) for line in labels.read_text().splitlines()]
    by_trace = {r["trace_id"]: r for r in read_judged(sink_files(sink))}
    for row in written:
        n = int(row["question"].split("#")[1].split()[0])
        record = by_trace[row["meta"]["source_id"]]
        assert row["answer"] == record["answer"] and row["contexts"] == [d["content"] for d in record["documents"]]
        assert row["labels"] == {"faithful": int(kind(n) == "faithful"), "answer_relevant": int(kind(n) != "off_topic"),
                                 "context_relevant": 1}
        assert row["meta"]["context_labels"] == [1, 0, 0] and row["meta"]["judge_scores"] == record["scores"]
    # offered in the fit's order: the first candidates sit nearer the threshold than the average one
    distance = [min(abs(v - 0.5) for v in r["meta"]["judge_scores"].values()) for r in written]
    assert sum(distance[:10]) / 10 < sum(distance) / len(distance)

    profile = tmp_path / "shop-support.json"
    code = await asyncio.to_thread(main, ["calibrate", str(labels), "--fit", str(profile), "--profile-name",
                                          "shop-support", "--bootstrap", "50", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "learning curve, faithfulness" in out and "context_relevance" in out
    assert "the first rows in label order (nearest the threshold, pipelines taking turns)" in out
    fitted = load_profile(profile)
    assert fitted.faithfulness_weights and fitted.relevancy_weights
    assert fitted.context_threshold is not None or fitted.context_weights
    assert fitted.label == "shop-support"

    sink2 = tmp_path / "judged-fitted.jsonl"
    info = await run_agent(tmp_path, sink2, range(100, 112), judge_profile=str(profile))
    assert info == [f'ragmon_judge_info{{judge="local",profile="shop-support",version="{LOCAL_VERSION}"}} 1.0']
    records = list(read_judged(sink_files(sink2)))
    assert len(records) == 12
    default, tuned = LocalJudge(), LocalJudge(profile=profile)
    changed = 0
    for r in records:
        contexts = [d["content"] for d in r["documents"]]
        expected = tuned.score_sync(r["question"], contexts, r["answer"]).values
        assert r["scores"] == pytest.approx({k: round(v, 4) for k, v in expected.items() if v is not None}, abs=1e-4)
        before = default.score_sync(r["question"], contexts, r["answer"]).values
        changed += any(abs((before[k] or 0) - (expected[k] or 0)) > 1e-3 for k in expected)
    assert changed, "the agent's scores are the fitted profile's, and they differ from the default's"
