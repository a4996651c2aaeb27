"""Declared evaluators in the agent: real OTLP traffic in, ragmon_score_ratio rows out over HTTP,
in /worst and /traces/{id}, within the series budget; bad files and judges refused at start-up."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from ragmon import semconv as sc
from ragmon.errors import ConfigError
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.scrape import scrape
from tests.helpers.traffic import CONTEXTS, OtlpTraffic, Request, healthy

FILE = """\
evaluators:
  - name: no_email
    kind: regex
    pattern: '[\\w.+-]+@[\\w-]+\\.[a-z]{2,}'
    pass_when: no_match
    threshold: 1.0
    role: answer
  - name: concise
    kind: heuristic
    check: length
    max_words: 30
  - name: shows_plan
    kind: regex
    pattern: 'Pro plan'
    pass_when: match
    buckets: true
"""
LEAK = Request("How much does the Pro plan cost per month?", CONTEXTS,
               "The Pro plan costs 49 dollars; write to billing.person@example.com for an invoice.")


async def _send(agent, requests):
    traffic = OtlpTraffic(f"http://127.0.0.1:{agent.receiver_port}/v1/traces")
    try:
        for r in requests:
            await asyncio.to_thread(traffic.send, r)
    finally:
        await asyncio.to_thread(traffic.close)
    assert await agent.wait_idle(30)


async def test_evaluators_are_rows_of_the_score_family(tmp_path):
    path = tmp_path / "evaluators.yaml"
    path.write_text(FILE)
    async with running_agent(ScriptedJudge(), evaluators=str(path), trace_inspector=True) as agent:
        await _send(agent, [healthy(), healthy(1), LEAK])
        m = await asyncio.to_thread(scrape, agent.metrics_port)
        base = f"http://127.0.0.1:{agent.metrics_port}"
        async with httpx.AsyncClient() as client:
            worst = (await client.get(f"{base}/worst")).json()["worst"]
            inspected = (await client.get(f"{base}/traces/{worst[0]['trace_id']}")).json()
            om = await client.get(f"{base}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    # sum and count only, in the same family as the built-ins: the pass share is sum / count
    assert m.value(f"{sc.M_SCORE}_count", metric="no_email", sample="rate") == 3
    assert m.value(f"{sc.M_SCORE}_sum", metric="no_email", sample="rate") == 2
    # one bucket (+Inf, which OpenMetrics requires), not 21
    assert [lab["le"] for lab in m.labelsets(f"{sc.M_SCORE}_bucket") if lab["metric"] == "no_email"] == ["+Inf"]
    assert m.value(f"{sc.M_SCORE}_sum", metric="concise") == 3
    # declared with buckets: a full histogram
    assert m.value(f"{sc.M_SCORE}_bucket", metric="shows_plan", le="0.05") == 0
    assert m.value(f"{sc.M_SCORE}_bucket", metric="shows_plan", le="+Inf") == 3
    # the leak is the worst trace, blamed on generation (role: answer), its reason without the address
    assert worst[0]["scores"]["no_email"] == 0.0
    assert worst[0]["verdict"] == sc.VERDICT_GENERATION and "no_email failed" in worst[0]["reason"]
    assert m.value(f"{sc.M_DIAGNOSIS}_total", verdict=sc.VERDICT_GENERATION) == 1
    assert inspected["scores"]["no_email"] == 0.0
    reason = inspected["evaluator_reasons"]["no_email"]
    assert reason.startswith("matched") and "example.com" not in reason  # the caught address is not copied
    # the OpenMetrics exposition (what Prometheus asks for) carries the compact series too
    families = {f.name: f for f in parse_openmetrics(om.text)}
    compact = [s for s in families[sc.M_SCORE].samples if s.labels.get("metric") == "no_email"]
    assert sorted(s.name for s in compact) == [f"{sc.M_SCORE}_bucket", f"{sc.M_SCORE}_count", f"{sc.M_SCORE}_sum"]


async def test_sixteen_evaluators_add_at_most_64_series_per_pair(tmp_path):
    many = "evaluators:\n" + "".join(
        f"  - {{name: rule_{i}, kind: regex, pattern: 'word{i}\\b', pass_when: no_match}}\n" for i in range(16))
    path = tmp_path / "many.yaml"
    path.write_text(many)
    traffic = [healthy(), Request("Q?", CONTEXTS, "An answer.", error=True)]  # rate and priority streams

    async def series(**settings) -> int:
        async with running_agent(ScriptedJudge(), priority_errors=True, **settings) as agent:
            await _send(agent, traffic)
            m = await asyncio.to_thread(scrape, agent.metrics_port)
        return sum(1 for _, lab, _ in m.samples if lab.get("pipeline") == "support")

    without, with_16 = await series(), await series(evaluators=str(path))
    assert 0 < with_16 - without <= 64, (without, with_16)


async def test_bad_files_and_llm_criteria_with_the_local_judge_stop_start_up(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("evaluators:\n  - name: x\n    kind: regex\n    pattern: '(unclosed'\n")
    with pytest.raises(ConfigError, match=rf"{bad}:4: evaluator 'x': invalid regular expression"):
        async with running_agent(ScriptedJudge(), evaluators=str(bad)):
            pass
    llm = tmp_path / "llm.yaml"
    llm.write_text("evaluators:\n  - name: polite\n    kind: llm\n    criterion: Is it polite?\n")
    with pytest.raises(ConfigError, match=r"polite \(line 2\) need the LLM judge"):
        async with running_agent(ScriptedJudge(), evaluators=str(llm)):
            pass
