"""From production: real SDK traffic -> a real agent (OTLP/HTTP, the LLM judge) -> its bounded
judged-trace sink -> ``ragmon dataset harvest`` -> unlabelled candidates."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragmon
from ragmon.agent import Agent
from ragmon.cli import main
from ragmon.config import load_agent_config
from ragmon.datasets.harvest import harvest, read_judged
from ragmon.evaluation.goldenset import load_golden_set
from ragmon.export.judged import JudgedSink, sink_files
from ragmon.scoring.llm import LlmJudge
from ragmon.types import Document, RagTrace, Scores
from tests.fakes.openai_server import FakeOpenAI

EMAIL = re.compile(r"[\w.]+@[\w.]+")
TOPICS = ["refunds", "shipping", "warranty", "descaling", "gift cards", "store credit"]


def redact(field: str, text: str) -> str:
    return EMAIL.sub("[email]", text)


@ragmon.retriever(name="kb")
def search(question: str) -> list[dict[str, Any]]:
    n = int(question.split("#")[1].split()[0])
    topic = TOPICS[n % len(TOPICS)]
    return [{"id": f"kb-{n}-{i}", "text": f"About {topic}: policy paragraph {i} for case {n}, write to "
             f"help@northwind.example for details. " + "Filler text. " * 10, "score": 0.9 - i / 10}
            for i in range(3)]


@ragmon.generator(name="answer", model="tmpl")
def answer(question: str, docs: list[dict[str, Any]]) -> str:
    n = int(question.split("#")[1].split()[0])
    return docs[0]["text"][:80] if n % 3 else "Bananas are yellow and grow in bunches."  # some unfaithful


def make_pipeline(name: str) -> Any:
    @ragmon.pipeline(name=name)
    def rag(question: str) -> str:
        return answer(question, search(question))

    return rag


def send_traffic(endpoint: str, count: int) -> None:
    ragmon.init(service_name="shop", endpoint=endpoint, redact=redact, set_global=False)
    pipelines = {"support": make_pipeline("support"), "sales": make_pipeline("sales")}
    for n in range(count):
        pipeline = "support" if n % 2 else "sales"
        pipelines[pipeline](f"Question #{n} about {TOPICS[n % len(TOPICS)]} from alice@example.com?")
    assert ragmon.shutdown() is True


async def run_agent_with_traffic(sink: Path, count: int, max_bytes: int) -> Agent:
    """The agent judges with the LLM judge against the OpenAI-protocol test server (deterministic
    verdicts from word overlap: the 'Bananas' answers are unfaithful)."""
    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, "trace_timeout_s": 2.0,
                                "export_judged": str(sink), "export_judged_max_bytes": max_bytes}, environ={})
    async with FakeOpenAI() as server:
        agent = Agent(config, registry=CollectorRegistry(), judge=LlmJudge(base_url=server.base_url, model="judge"))
        await agent.start()
        try:
            await asyncio.to_thread(send_traffic, f"http://127.0.0.1:{agent.receiver_port}/v1/traces", count)
            assert await agent.wait_idle(60)
        finally:
            await agent.stop()
    return agent


async def test_sdk_to_agent_to_sink_to_harvest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sink = tmp_path / "judged" / "judged.jsonl"
    await run_agent_with_traffic(sink, 12, 1024 * 1024)
    records = list(read_judged(sink_files(sink)))
    assert len(records) == 12  # every judged trace, one line each
    raw = "".join(p.read_text() for p in sink_files(sink))
    assert "alice@example.com" not in raw and "help@northwind.example" not in raw  # redacted by the SDK hook
    assert raw.count("[email]") >= 12 * 4
    first = records[0]
    assert {"trace_id", "service", "pipeline", "question", "answer", "documents", "scores", "verdict"} <= set(first)
    assert first["service"] == "shop" and first["pipeline"] in ("support", "sales")
    assert set(first["scores"]) >= {"faithfulness", "answer_relevancy", "context_precision"}

    out = tmp_path / "candidates.jsonl"
    code = await asyncio.to_thread(main, ["dataset", "harvest", str(sink), "--n", "6", "--out", str(out)])
    assert code == 0
    assert "6 candidate(s) from 12 judged trace(s)" in capsys.readouterr().out
    golden = load_golden_set(out)
    assert len(golden.rows) == 6 and not golden.problems
    by_trace = {r["trace_id"]: r for r in records}
    for row in golden.rows:
        record = by_trace[row.meta["trace_id"]]
        n = int(row.question.split("#")[1].split()[0])
        assert row.id == f"prod-{record['trace_id'][:16]}"
        # the retrieved ids, in rank order
        assert list(row.ground_truth_docs) == [f"kb-{n}-0", f"kb-{n}-1", f"kb-{n}-2"]
        assert row.meta["label_status"] == "unlabelled" and row.meta["source"] == "production"
        assert row.meta["pipeline"] == record["pipeline"] and row.meta["verdict"] == record["verdict"]
        assert "[email]" in row.question
    # stratified: both pipelines and both verdicts are represented
    assert {r.meta["pipeline"] for r in golden.rows} == {"support", "sales"}
    assert {r["verdict"] for r in records} == {"ok", "generation_failure"}
    assert {r.meta["verdict"] for r in golden.rows} == {"ok", "generation_failure"}


async def test_the_sink_stays_within_its_cap_and_rotates(tmp_path: Path) -> None:
    sink = tmp_path / "judged.jsonl"
    cap = 8192
    await run_agent_with_traffic(sink, 24, cap)
    files = sink_files(sink)
    assert len(files) >= 3  # rotated: judged.jsonl.N .. judged.jsonl.1, judged.jsonl
    assert sum(p.stat().st_size for p in files) <= cap
    assert all(p.stat().st_size <= cap // 4 for p in files)
    records = list(read_judged(files))
    assert 0 < len(records) < 24  # the oldest were rotated out
    numbers = [int(r["question"].split("#")[1].split()[0]) for r in records]
    # the newest traces are the ones kept (judged 4 at a time, so their order may differ slightly)
    assert max(numbers) == 23 and min(numbers) >= 24 - len(numbers) - 4


def _trace(n: int, text: str = "x") -> RagTrace:
    return RagTrace(trace_id=f"{n:032x}", service="s", pipeline="p", question=f"q{n}", answer="a",
                    documents=(Document(f"d{n}", text, 0.5, 0),))


def test_an_oversize_line_is_dropped_and_counted(tmp_path: Path) -> None:
    sink = JudgedSink(tmp_path / "j.jsonl", max_bytes=4096, backups=3)
    scores = Scores({"faithfulness": 0.2}, judge="local")
    sink(_trace(1), scores, "generation_failure")
    sink(_trace(2, "y" * 5000), scores, "ok")
    assert (sink.written, sink.dropped) == (1, 1)
    assert [r["question"] for r in read_judged(sink_files(tmp_path / "j.jsonl"))] == ["q1"]


def test_stratified_harvest_balances_strata_and_drops_repeats() -> None:
    records = []
    for n in range(40):
        verdict = "ok" if n < 34 else "retrieval_failure"
        score = 0.9 if verdict == "ok" else 0.1
        records.append({"trace_id": f"t{n}", "pipeline": "p", "question": f"question {n}", "verdict": verdict,
                        "scores": {"faithfulness": score, "context_precision": score}, "documents": []})
    records.append({**records[0], "trace_id": "again"})  # the same question again
    records.append({"trace_id": "nq", "pipeline": "p", "question": None})
    rows, summary = harvest(records, 8, seed=1)
    picked = Counter(r["meta"]["verdict"] for r in rows)
    assert picked == {"ok": 4, "retrieval_failure": 4}  # balanced, though failures are 6 of 40
    assert summary["skipped"] == {"repeated_question": 1, "no_question": 1}
    assert {r["meta"]["score_band"] for r in rows} == {"high", "low"}
    proportional, _ = harvest(records, 10, seed=1, allocation="proportional")
    assert Counter(r["meta"]["verdict"] for r in proportional) == {"ok": 8, "retrieval_failure": 2}
    assert harvest(records, 8, seed=1)[0] == rows  # seeded: the same sample again
    assert json.dumps(rows)  # plain JSON
