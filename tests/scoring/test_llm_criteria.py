"""User-declared llm evaluators judged inside the LLM judge's ONE compact call, over real HTTP
(the OpenAI-protocol test server); a verdict the reply leaves out is counted, never guessed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ragmon import semconv as sc
from ragmon.scoring.llm import prompts as p
from ragmon.scoring.llm.criteria import with_criteria, with_criteria_schema
from ragmon.scoring.llm.verdicts import compact_schema
from tests.fakes.openai_server import FakeOpenAI, Reply, compact_responder
from tests.helpers.scrape import scrape
from tests.helpers.traffic import CONTEXTS, Request, healthy
from tests.scoring.test_llm_agent import llm_agent, send

FILE = """\
evaluators:
  - {name: polite, kind: llm, criterion: 'Is the answer polite and professional?', pass_when: yes}
  - {name: mentions_competitor, kind: llm, criterion: 'Does the answer recommend a competitor?', pass_when: no}
  - {name: no_email, kind: regex, pattern: '@example\\.com', pass_when: no_match}
"""
RUDE = Request("How much does the Pro plan cost per month?", CONTEXTS,
               "Read the page yourself, idiot: the Pro plan costs 49 dollars per month.")


def criteria_responder(body: dict[str, Any]) -> Reply:
    """The compact judgement plus the criteria the request's schema asks for: 'polite' is false for
    an answer that says 'idiot'; the competitor verdict is left out when the answer says 'Acme'."""
    verdict = json.loads(compact_responder(body).content or "{}")
    schema = body["response_format"]["json_schema"]["schema"]
    names = list(schema["properties"].get("criteria", {}).get("properties", {}))
    answer = " ".join(verdict["claims"][i]["claim"] for i in range(len(verdict["claims"])))
    criteria = {"polite": "idiot" not in answer, "mentions_competitor": False}
    if "Acme" in answer:
        del criteria["mentions_competitor"]
    verdict["criteria"] = {k: v for k, v in criteria.items() if k in names}
    return Reply.json(verdict)


async def test_criteria_ride_in_the_one_compact_call(tmp_path):
    path = tmp_path / "evaluators.yaml"
    path.write_text(FILE)
    acme = Request("How much does the Pro plan cost per month?", CONTEXTS,
                   "The Pro plan costs 49 dollars per month, less than Acme.")
    async with FakeOpenAI() as server:
        server.responder = criteria_responder
        async with llm_agent(server, evaluators=str(path)) as agent:
            await send(agent, [healthy(), RUDE, acme])
            m = await asyncio.to_thread(scrape, agent.metrics_port)
        chats = server.chat_requests
    assert len(chats) == 3  # one chat call per trace, criteria included
    schema = chats[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["criteria"]["required"] == ["polite", "mentions_competitor"]
    assert "Does the answer recommend a competitor?" in chats[0].body["messages"][0]["content"]
    assert m.value(f"{sc.M_SCORE}_count", metric="polite", judge="llm") == 3
    assert m.value(f"{sc.M_SCORE}_sum", metric="polite", judge="llm") == 2  # the rude answer fails
    # pass_when: no — "no competitor recommended" passes; the verdict left out is not guessed
    assert m.value(f"{sc.M_SCORE}_count", metric="mentions_competitor") == 2
    assert m.value(f"{sc.M_SCORE}_sum", metric="mentions_competitor") == 2
    assert m.value(f"{sc.M_EVALUATOR_ERRORS}_total", metric="mentions_competitor", reason="missing_verdict") == 1
    # the rule-based evaluator runs beside the LLM judge, and the built-ins still count for every trace
    assert m.value(f"{sc.M_SCORE}_count", metric="no_email") == 3
    assert m.value(f"{sc.M_SCORE}_count", metric="faithfulness") == 3


def test_without_criteria_the_compact_prompt_and_schema_are_unchanged():
    inp = p.fit_to_budget("Q?", ["A context."], "An answer.", 6000)
    messages = p.compact_messages(inp, nonce="n")
    assert with_criteria(messages, ()) is messages
    schema = compact_schema(1)
    assert with_criteria_schema(schema, ()) is schema
