"""User feedback reaches /metrics: in the trace, and after the trace closed (record_feedback with a
trace id), through real OTLP/HTTP from the SDK to a running agent."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

import ragmon
from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.config import load_agent_config
from tests.helpers.scrape import scrape


@ragmon.pipeline(name="refunds")
def rag(question: str, feedback: str | None) -> tuple[str, str | None]:
    docs = search(question)
    if feedback:
        ragmon.record_feedback(feedback)
    return f"Refunds take {len(docs)} days.", ragmon.current_trace_id()


@ragmon.retriever(name="kb")
def search(question: str) -> list[str]:
    return ["Refunds take 3 days.", "Shipping is free."]


async def test_feedback_in_the_trace_and_after_it_closed_is_counted() -> None:
    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, "sample_rate": 0.0}, environ={})
    agent = Agent(config, registry=CollectorRegistry(), judge=None)
    await agent.start()
    try:
        # the SDK side runs in a thread: its flush blocks, and the agent serves on this event loop
        ids = await asyncio.to_thread(_serve_two_requests, agent)
        await asyncio.to_thread(_wait_for, lambda: scrape(agent.metrics_port).value(
            f"{sc.M_TRACES_RECEIVED}_total", service="shop", pipeline="refunds") == 2)
        # the user clicks after the answer was shown: the traces are closed by now
        await asyncio.to_thread(_late_feedback, ids)
        await asyncio.to_thread(_wait_for, lambda: scrape(agent.metrics_port).value(
            f"{sc.M_DROPPED}_total", reason=sc.DROP_LATE_SPAN) == 2)
        m = await asyncio.to_thread(scrape, agent.metrics_port)
    finally:
        await agent.stop()
    assert ids[0] and ids[1] and ids[0] != ids[1]
    labels = {"service": "shop", "pipeline": "refunds"}
    assert m.value(f"{sc.M_FEEDBACK}_total", **labels, feedback="negative") == 2  # thumbs_down, then 0.0
    assert m.value(f"{sc.M_FEEDBACK}_total", **labels, feedback="positive") == 1
    # late feedback is counted, but the closed trace is not assembled a second time
    assert m.value(f"{sc.M_TRACES_RECEIVED}_total", **labels) == 2


def _serve_two_requests(agent: Agent) -> tuple[str | None, str | None]:
    ragmon.init(service_name="shop", endpoint=f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                set_global=False)
    _, in_trace_id = rag("How long do refunds take?", "thumbs_down")
    _, later_id = rag("Is shipping free?", None)
    assert ragmon.flush() is True
    return in_trace_id, later_id


def _late_feedback(ids: tuple[str | None, str | None]) -> None:
    assert ragmon.record_feedback("positive", trace_id=ids[1], pipeline="refunds") is True
    assert ragmon.record_feedback(0.0, trace_id=ids[0], pipeline="refunds") is True
    assert ragmon.shutdown() is True


def _wait_for(predicate, timeout_s: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached")
