"""Contradicted claims in the agent, with the offline local judge: real OTLP spans in; the share of
answers that contradict their sources counted on /metrics; /worst and /traces/{id} show the claim,
the context sentence that decides it and the reason."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from tests.helpers.scrape import scrape
from tests.helpers.traffic import CONTEXTS, OtlpTraffic, Request, healthy

SWAPPED = Request("Which plan has single sign-on?", CONTEXTS,
                  "The Pro plan costs 49 dollars per month and includes 10 seats. Single sign-on with SAML is "
                  "included in the Pro plan only.")
NEGATED = Request("Is single sign-on included?", CONTEXTS,
                  "Single sign-on with SAML is not included in the Enterprise plan.")


async def test_contradicting_answers_are_counted_and_shown() -> None:
    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, "sample_rate": 1.0, "trace_timeout_s": 1.0,
                                "judge": "local", "trace_inspector": True}, environ={})
    async with Agent(config, registry=CollectorRegistry()) as agent:
        traffic = OtlpTraffic(f"http://127.0.0.1:{agent.receiver_port}/v1/traces")
        try:
            for request in (healthy(), SWAPPED, healthy(1), NEGATED):
                await asyncio.to_thread(traffic.send, request)
        finally:
            await asyncio.to_thread(traffic.close)
        assert await agent.wait_idle(60)
        m = await asyncio.to_thread(scrape, agent.metrics_port)
        base = f"http://127.0.0.1:{agent.metrics_port}"
        async with httpx.AsyncClient() as client:
            worst = (await client.get(f"{base}/worst")).json()["worst"]
            inspected = (await client.get(f"{base}/traces/{worst[0]['trace_id']}")).json()
    assert m.value(f"{sc.M_ANSWERS_CHECKED}_total", judge="local") == 4
    assert m.value(f"{sc.M_ANSWERS_CONTRADICTING}_total", judge="local") == 2
    contradicted = {c["reason"].split(":")[0].split(" ")[0]: c for w in worst for c in w["contradicted_claims"]}
    assert set(contradicted) == {"name", "negation"}, worst
    assert contradicted["name"]["evidence"] == CONTEXTS[2]
    assert contradicted["name"]["reason"] == "name: Pro ≠ Enterprise"
    assert contradicted["negation"]["evidence"] == CONTEXTS[2]
    assert all(not w["contradicted_claims"] for w in worst if w["scores"]["faithfulness"] >= 0.5)
    verdicts = inspected["claim_verdicts"]
    assert {v["verdict"] for v in verdicts} <= {"supported", "contradicted", "unsupported"}
    assert any(v["verdict"] == "contradicted" for v in verdicts)
