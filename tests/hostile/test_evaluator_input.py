"""Evaluator files and regexes are input too: a hostile file is one clear error at start-up, and a
catastrophic regex on a huge answer is counted and survived while the agent keeps serving."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ragmon import semconv as sc
from ragmon.evaluators import EvaluatorFileError, load_evaluators, parse_evaluators
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.scrape import scrape
from tests.helpers.traffic import CONTEXTS, OtlpTraffic, Request, healthy

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
evaluators:
  - {name: bomb, kind: json_schema, schema: {enum: *g}}
"""


@pytest.mark.parametrize(("text", "words"), [
    (BILLION_LAUGHS, "anchors and aliases are not allowed"),
    ("evaluators: " + "[" * 50_000 + "]" * 50_000, "nested too deeply"),
    ("evaluators:\n  - {name: x, kind: json_schema, schema: " + "{not: " * 3_000 + "{}" + "}" * 3_000 + "}\n",
     "nested too deeply"),
    ("evaluators:\n  - {name: x, kind: regex, pattern: '" + "a" * 5_000 + "'}\n", "at most 2000"),
    ("evaluators:\n  - {name: x, kind: llm, criterion: '" + "why " * 500 + "'}\n", "at most 1000"),
    ("evaluators:\n  - {name: x, kind: json_schema, schema: {$ref: 'https://evil.example/s.json'}}\n", "remote $ref"),
    ("evaluators:\n  - {name: \"x\\u0000\", kind: regex, pattern: a}\n", "must match"),
    ("\x00\x01evaluators", "not valid YAML"),
])
def test_hostile_files_are_one_clear_error(text, words):
    with pytest.raises(EvaluatorFileError) as caught:
        parse_evaluators(text, "hostile.yaml")
    assert words in str(caught.value) and str(caught.value).startswith("hostile.yaml")


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("evaluators: []\n" + "#" * (2 << 20))
    with pytest.raises(EvaluatorFileError, match="at most 1048576"):
        load_evaluators(path)


async def test_a_catastrophic_regex_is_counted_and_survived(tmp_path):
    path = tmp_path / "evaluators.yaml"
    path.write_text("evaluators:\n  - {name: slow, kind: regex, pattern: '(a+)+$'}\n"
                    "  - {name: short, kind: heuristic, check: length, max_words: 50}\n")
    huge = Request("Why?", CONTEXTS, "a" * 60_000 + "b")
    async with running_agent(ScriptedJudge(), evaluators=str(path), max_text_chars=100_000) as agent:
        traffic = OtlpTraffic(f"http://127.0.0.1:{agent.receiver_port}/v1/traces")
        try:
            for request in (huge, healthy(), huge, healthy(1)):
                await asyncio.to_thread(traffic.send, request)
        finally:
            await asyncio.to_thread(traffic.close)
        assert await agent.wait_idle(60)
        async with httpx.AsyncClient() as client:
            health = await client.get(f"http://127.0.0.1:{agent.metrics_port}/healthz")
        m = await asyncio.to_thread(scrape, agent.metrics_port)
    assert health.status_code == 200
    assert m.value(f"{sc.M_TRACES_SCORED}_total") == 4
    assert m.value(f"{sc.M_EVALUATOR_ERRORS}_total", metric="slow", reason="timeout") == 2
    assert m.value(f"{sc.M_SCORE}_count", metric="slow") == 2  # the two normal answers
    assert m.value(f"{sc.M_SCORE}_count", metric="short") == 4  # the other evaluator judged all four
