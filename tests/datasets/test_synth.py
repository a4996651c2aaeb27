"""``ragmon dataset synth`` against the OpenAI-protocol test server over real HTTP (the one stand-in
the house allows), with the real MiniLM embedder for distractors and deduplication."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragmon.cli import main
from ragmon.datasets import prompts as sp
from ragmon.datasets.chunking import ChunkingConfig, parse_chunk_id
from ragmon.datasets.corpus import load_corpus
from ragmon.datasets.synth import Synthesizer, SynthOptions, self_judging_warning
from ragmon.evaluation.goldenset import load_golden_set
from ragmon.scoring.llm import LlmJudgeSettings
from tests.fakes.openai_server import FakeOpenAI, Reply, fenced_payload

SMALL = ChunkingConfig(48, 0, "paragraph")


def _task(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    for name, task in (("fact", sp.FACT_TASK), ("adversarial", sp.ADVERSARIAL_TASK),
                       ("multi_hop", sp.MULTI_HOP_TASK), ("realism", sp.REALISM_TASK),
                       ("answer_check", sp.ANSWER_CHECK_TASK)):
        if system.startswith(task.splitlines()[0]):
            return name
    raise AssertionError(f"unknown prompt: {system[:80]}")


def _words(text: str, n: int) -> str:
    return " ".join(re.findall(r"[A-Za-z0-9]+", text)[:n])


def _offered(body: dict[str, Any]) -> list[str]:
    """The words an adversarial request asks the model to use (in the instruction, outside the data)."""
    text = body["messages"][1]["content"]
    return text.rsplit("Words to use (at least two): ", 1)[1].split(", ")


def make_responder(rating: Callable[[str], int] = lambda q: 5,
                   question: Callable[[str], str] | None = None,
                   answered: Callable[[dict[str, Any]], bool] = lambda payload: True,
                   ) -> Callable[[dict[str, Any]], Reply]:
    def respond(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "user" and body["messages"][-1]["content"].startswith("Your reply"):
            body = {**body, "messages": body["messages"][:2]}  # the repair attempt: answer the original task
        task, payload = _task(body), fenced_payload(body)
        if task == "fact":
            sentence = re.split(r"(?<=\.)\s", payload["passage"].strip().lstrip("#").strip())[0]
            q = question(sentence) if question else f"Is it true that {_words(sentence, 12).lower()}?"
            return Reply.json({"fact": sentence, "question": q})
        if task == "adversarial":  # uses the first two offered terms, claims none (the words are checked)
            terms = " and ".join(_offered(body)[:2])
            return Reply.json({"question": f"With {terms} in mind, is it true that "
                                           f"{_words(payload['fact'], 8).lower()}?", "distractor_terms": []})
        if task == "multi_hop":
            return Reply.json({"question": f"Which place links {_words(payload['passage_1'], 4)} and "
                                           f"{_words(payload['passage_2'], 4)} through {payload['shared']}?",
                               "answer": payload["shared"], "fact_1": payload["passage_1"][:60],
                               "fact_2": payload["passage_2"][:60]})
        if task == "answer_check":
            return Reply.json({"answered": answered(payload), "reason": "scripted"})
        return Reply.json({"rating": rating(payload["question"]), "reason": "scripted"})

    return respond


@pytest.fixture
async def server() -> Any:
    async with FakeOpenAI() as s:
        s.responder = make_responder()
        yield s


def _settings(server: FakeOpenAI, **kw: Any) -> LlmJudgeSettings:
    base = {"base_url": server.base_url, "model": "gen-model", "backoff_base_s": 0.01, "backoff_max_s": 0.05,
            "concurrency": 1, "max_completion_tokens": 256}
    return LlmJudgeSettings(**{**base, **kw})


async def _synth(server: FakeOpenAI, corpus: Path, **kw: Any) -> Any:
    settings = _settings(server, **kw.pop("settings", {}))
    options = SynthOptions(**{"n": 3, "chunking": SMALL, "min_chunk_tokens": 8, **kw})
    async with Synthesizer(settings, options) as synthesizer:
        return await synthesizer.run(load_corpus(corpus))


async def test_rows_carry_gold_chunk_fact_and_provenance(server: FakeOpenAI, corpus_dir: Path,
                                                         tmp_path: Path) -> None:
    result = await _synth(server, corpus_dir, n=3, judge_model="gpt-judge")
    assert len(result.rows) == 3 and result.stats.written == 3
    docs = {d.id: d for d in load_corpus(corpus_dir)}
    for row in result.rows:
        (chunk_id,) = row["ground_truth_docs"]
        doc_id, start, end = parse_chunk_id(chunk_id)
        assert row["ground_truth_answer"] in docs[doc_id].text[start:end] or \
            row["ground_truth_answer"] in docs[doc_id].text  # the fact comes from the gold chunk
        assert row["question_type"] == "factoid" and row["question"].endswith("?")
        meta = row["meta"]
        assert meta["source"] == "synthetic" and meta["kind"] == "factoid"
        assert meta["generator_model"] == "gen-model" and meta["prompt_version"] == sp.FACT_VERSION
        assert meta["realism"] == 5 and meta["realism_model"] == "gen-model"
        assert meta["realism_prompt_version"] == sp.REALISM_VERSION
        assert meta["answer_check_model"] == "gen-model"
        assert meta["answer_check_prompt_version"] == sp.ANSWER_CHECK_VERSION
        assert meta["source_docs"] == [doc_id]
        assert meta["chunking"] == {"size": 48, "overlap": 0, "mode": "paragraph", "title_prefix": True,
                                   "count_title": False}
    # the rows are a valid golden set: no problems, no unknown keys
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in result.rows))
    golden = load_golden_set(path)
    assert len(golden.rows) == 3 and not golden.problems and not golden.warnings
    # JSON mode over the wire: the strict schema first; tokens from the replies' usage
    first = server.chat_requests[0].body
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "fact_question"
    assert result.stats.usage.calls == 9 and result.stats.usage.prompt_tokens == 900  # fact, answer check, realism
    assert result.stats.warnings == []


async def test_malformed_json_gets_one_repair_then_is_counted(server: FakeOpenAI, corpus_dir: Path) -> None:
    server.enqueue(Reply.text('{"fact": "Refunds are paid", "question": '),  # truncated: repaired below
                   Reply.text("Sure! Here is a question about refunds."),  # no JSON at all ...
                   Reply.text('{"fact": 3}'))  # ... and the repair is wrong too: the candidate is dropped
    result = await _synth(server, corpus_dir, n=2)
    assert result.stats.written == 2
    assert result.stats.dropped["invalid_reply"] == 1
    repair = [r.body for r in server.chat_requests if r.body["messages"][-1]["content"].startswith("Your reply")]
    assert len(repair) == 2 and "truncated" in repair[0]["messages"][-1]["content"]


async def test_refusals_and_declines_are_dropped_and_counted(server: FakeOpenAI, corpus_dir: Path) -> None:
    refusal_body = json.dumps({  # OpenAI's refusal shape: content null, the refusal text beside it
        "id": "chatcmpl-r", "object": "chat.completion", "created": 0, "model": "gen-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."}}]})
    server.enqueue(Reply.raw(refusal_body), Reply.raw(refusal_body),
                   Reply.text("I'm sorry, but I can't assist with that request."),
                   Reply.text("I'm sorry, I still can't."),
                   Reply.json({"fact": None, "question": None}))
    result = await _synth(server, corpus_dir, n=2)
    assert result.stats.dropped["invalid_reply"] == 2
    assert result.stats.dropped["declined"] == 1
    assert result.stats.written == 2  # the run goes on with other chunks


async def test_retries_429_with_retry_after_and_5xx(server: FakeOpenAI, corpus_dir: Path) -> None:
    server.enqueue(Reply.error(429, retry_after="0"), Reply.error(503))
    result = await _synth(server, corpus_dir, n=1)
    assert result.stats.written == 1 and not result.stats.dropped
    first_three = server.chat_requests[:3]
    assert first_three[0].body == first_three[1].body == first_three[2].body  # the same request, retried twice
    assert _task(first_three[0].body) == "fact"


async def test_a_server_without_json_schema_gets_json_object(server: FakeOpenAI, corpus_dir: Path) -> None:
    server.reject_formats = {"json_schema"}
    result = await _synth(server, corpus_dir, n=2)
    assert result.stats.written == 2 and not result.stats.dropped
    formats = [r.body.get("response_format", {}).get("type") for r in server.chat_requests]
    assert formats[0] == "json_schema" and set(formats[1:]) == {"json_object"}  # remembered for later calls


async def test_realism_filter_drops_low_rated_rows(server: FakeOpenAI, corpus_dir: Path) -> None:
    server.responder = make_responder(rating=lambda q: 2 if "warranty" in q or "kettle" in q else 4)
    result = await _synth(server, corpus_dir, n=20, min_realism=4)
    assert result.stats.dropped["low_realism"] >= 1
    assert result.stats.realism[2] == result.stats.dropped["low_realism"]
    assert all(r["meta"]["realism"] == 4 for r in result.rows)
    assert not any("warranty" in r["question"] or "kettle" in r["question"] for r in result.rows)
    # min_realism 0: no rating calls at all, nothing dropped for realism
    before = len(server.chat_requests)
    unrated = await _synth(server, corpus_dir, n=20, min_realism=0)
    assert {_task(r.body) for r in server.chat_requests[before:]} == {"fact", "answer_check"}
    assert "low_realism" not in unrated.stats.dropped and unrated.rows[0]["meta"]["realism"] is None


async def test_near_duplicate_questions_are_dropped(server: FakeOpenAI, corpus_dir: Path) -> None:
    questions = iter(["How long do refunds take to reach my card?", "How long do refunds take to reach my card",
                      "How long does a refund take to reach my card?", "Which countries does Northwind ship to?"])
    server.responder = make_responder(question=lambda s: next(questions, "Where is the warehouse?"))
    result = await _synth(server, corpus_dir, n=3)
    kept = [r["question"] for r in result.rows]
    assert kept[0] == "How long do refunds take to reach my card?"
    assert "How long do refunds take to reach my card" not in kept  # same words
    assert "How long does a refund take to reach my card?" not in kept  # MiniLM cosine >= 0.9
    assert result.stats.dropped["duplicate"] == 2


async def test_adversarial_rows_use_distractors_from_other_documents(server: FakeOpenAI, corpus_dir: Path) -> None:
    result = await _synth(server, corpus_dir, n=2, kinds=("adversarial",))
    assert result.stats.written == 2
    for row in result.rows:
        meta = row["meta"]
        assert row["difficulty"] == "hard" and meta["kind"] == "adversarial"
        assert meta["prompt_version"] == sp.ADVERSARIAL_VERSION and meta["fact_prompt_version"] == sp.FACT_VERSION
        target_doc = parse_chunk_id(row["ground_truth_docs"][0])[0]
        assert 1 <= len(meta["distractors"]) <= 2
        assert all(parse_chunk_id(d)[0] != target_doc for d in meta["distractors"])
        assert len(meta["distractor_terms"]) == 2 and set(meta["distractor_terms"]) <= set(meta["offered_terms"])
        assert all(t.lower() in row["question"].lower() for t in meta["distractor_terms"])
        assert meta["base_question"].startswith("Is it true that")
    adversarial = [r.body for r in server.chat_requests if _task(r.body) == "adversarial"]
    # the plain question and fact travel fenced; the words (plain words only) in the instruction
    assert set(fenced_payload(adversarial[0])) == {"question", "fact"}
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]", w) for w in _offered(adversarial[0]))


async def test_adversarial_rewrite_gets_one_retry_naming_the_missed_words(server: FakeOpenAI,
                                                                         corpus_dir: Path) -> None:
    base = make_responder()

    def respond(body: dict[str, Any]) -> Reply:
        if _task(body) == "adversarial" and len(body["messages"]) == 2:  # first try: one word only
            return Reply.json({"question": f"With {_offered(body)[0]} in mind, is it true that "
                                           f"{_words(fenced_payload(body)['fact'], 8).lower()}?",
                               "distractor_terms": _offered(body)})
        return base(body)

    server.responder = respond
    result = await _synth(server, corpus_dir, n=1, kinds=("adversarial",), min_distractor_terms=2)
    assert result.stats.written == 1 and len(result.rows[0]["meta"]["distractor_terms"]) == 2
    retries = [r.body for r in server.chat_requests if _task(r.body) == "adversarial" and len(r.body["messages"]) == 4]
    assert len(retries) == 1
    assert retries[0]["messages"][-1]["content"].startswith("Your question contains " + _offered(retries[0])[0])


async def test_adversarial_rewrite_that_drifts_from_the_question_is_dropped(server: FakeOpenAI,
                                                                           corpus_dir: Path) -> None:
    base = make_responder()

    def respond(body: dict[str, Any]) -> Reply:
        if _task(body) == "adversarial":  # uses the words but asks something else
            return Reply.json({"question": f"How do {' and '.join(_offered(body)[:2])} relate to each other?",
                               "distractor_terms": []})
        return base(body)

    server.responder = respond
    result = await _synth(server, corpus_dir, n=1, kinds=("adversarial",), max_attempts_factor=2)
    assert result.stats.written == 0 and result.stats.dropped["drifted"] >= 1


async def test_adversarial_question_without_distractor_terms_is_dropped(server: FakeOpenAI, corpus_dir: Path) -> None:
    base = make_responder()

    def respond(body: dict[str, Any]) -> Reply:
        if _task(body) == "adversarial":  # claims to use the terms, but the question has only one of them
            terms = _offered(body)
            return Reply.json({"question": f"What about {terms[0]} and the rest of it?", "distractor_terms": terms})
        return base(body)

    server.responder = respond
    result = await _synth(server, corpus_dir, n=1, kinds=("adversarial",), max_attempts_factor=2,
                          min_distractor_terms=2)
    assert result.stats.written == 0 and result.stats.dropped["no_distractor_terms"] >= 1
    assert result.stats.dropped["no_distractor_terms"] == result.stats.candidates - result.stats.dropped[
        "no_distractors"]


async def test_adversarial_question_naming_the_target_passage_is_dropped(server: FakeOpenAI,
                                                                        corpus_dir: Path) -> None:
    base = make_responder()

    def respond(body: dict[str, Any]) -> Reply:
        if _task(body) == "adversarial":
            terms = " and ".join(_offered(body)[:2])
            return Reply.json({"question": f"What does the target passage say about {terms}?",
                               "distractor_terms": []})
        return base(body)

    server.responder = respond
    result = await _synth(server, corpus_dir, n=1, kinds=("adversarial",), max_attempts_factor=2)
    assert result.stats.written == 0 and result.stats.dropped["source_reference"] >= 1


async def test_multi_hop_rows_fill_hops(server: FakeOpenAI, corpus_dir: Path) -> None:
    result = await _synth(server, corpus_dir, n=1, kinds=("multi_hop",), chunking=ChunkingConfig(256, 0, "paragraph"))
    (row,) = result.rows
    assert row["question_type"] == "multi_hop" and row["meta"]["kind"] == "multi_hop"
    first, second = row["hops"]
    assert row["ground_truth_docs"] == [first[0], second[0]]
    assert parse_chunk_id(first[0])[0] != parse_chunk_id(second[0])[0]
    assert row["meta"]["bridge"] in ("leipzig", "northwind")
    assert row["ground_truth_answer"] == row["meta"]["bridge"]


def test_self_judging_warning_text() -> None:
    assert self_judging_warning("gpt-4o", "gpt-4o-mini") is None
    assert self_judging_warning("gpt-4o", None) is None
    assert "also the judge model" in (self_judging_warning("openai/GPT-4o", "gpt-4o") or "")


async def test_cli_writes_rows_and_warns_when_generator_judges(server: FakeOpenAI, corpus_dir: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out, stats = tmp_path / "synth.jsonl", tmp_path / "stats.json"
    monkeypatch.setenv("RAGMON_JUDGE_MODEL", "qwen-7b")
    args = ["dataset", "synth", str(corpus_dir), "--n", "2", "--out", str(out), "--base-url", server.base_url,
            "--model", "qwen-7b", "--chunk-size", "48", "--stats", str(stats)]
    assert await asyncio.to_thread(main, args) == 0
    captured = capsys.readouterr()
    assert "warning: the generator model 'qwen-7b' is also the judge model" in captured.err
    assert "wrote 2 of 2 rows" in captured.out
    assert len(load_golden_set(out).rows) == 2
    assert json.loads(stats.read_text())["warnings"]
    assert await asyncio.to_thread(main, [*args, "--judge-model", "llama-70b"]) == 0
    assert "warning" not in capsys.readouterr().err
    # no model at all: a usage error, not a traceback
    monkeypatch.delenv("RAGMON_SYNTH_MODEL", raising=False)
    no_model = ["dataset", "synth", str(corpus_dir), "--n", "2", "--out", str(out), "--base-url", server.base_url]
    assert await asyncio.to_thread(main, no_model) == 2
    assert "generator model is required" in capsys.readouterr().err


async def test_cli_chunking_options_reach_the_rows(server: FakeOpenAI, corpus_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "synth.jsonl"
    args = ["dataset", "synth", str(corpus_dir), "--n", "2", "--out", str(out), "--base-url", server.base_url,
            "--model", "gen", "--chunk-size", "48", "--chunk-overlap", "0.25", "--count-title"]
    assert await asyncio.to_thread(main, args) == 0
    chunking = load_golden_set(out).rows[0].meta["chunking"]
    assert chunking["overlap"] == 12 and chunking["count_title"] is True


def test_offered_terms_are_specific_distractor_words_the_target_lacks() -> None:
    from ragmon.datasets.chunking import Chunk
    from ragmon.datasets.synth_search import TermRarity, offer_terms, terms_used

    def chunk(i: int, text: str) -> Chunk:
        return Chunk(f"d{i}#0-{len(text)}", f"d{i}", text, 0, len(text), len(text.split()))

    target = chunk(0, "Insulin signalling controls growth in fruit flies. The effect was found in larvae.")
    b = chunk(1, "Kinase activity controls growth of zebrafish fins; the effect was found in adults.")
    c = chunk(2, "Kinase inhibitors and growth of mouse tumours: the effect was found in cultured cells.")
    filler = [chunk(3 + i, f"The effect was found in study {i} of adults and cells.") for i in range(6)]
    rarity = TermRarity([target, b, c, *filler])
    offered = offer_terms(target, "Insulin signalling controls growth.", [b, c], rarity, limit=20)
    assert offered[0] == "Kinase"  # in both distractors
    assert "growth" not in [t.lower() for t in offered] and "effect" not in offered  # the target has them
    assert "zebrafish" in offered and "adults" not in offered  # "adults" is in most chunks: points nowhere
    used = terms_used("Does kinase activity in zebrafish control growth?", offered)
    assert set(used) == {"Kinase", "zebrafish", "activity"}


async def test_a_target_outside_the_distractor_pool_is_embedded_on_demand() -> None:
    import numpy as np

    from ragmon.datasets.chunking import Chunk
    from ragmon.datasets.synth_search import Neighbours

    texts = ["kettle warranty claims", "kettle descaling limescale", "parcel shipping fee", "kettle warranty years"]
    chunks = [Chunk(f"d{i}#0-{len(t)}", f"d{i}", t, 0, len(t), 3) for i, t in enumerate(texts)]
    vocab = sorted({w for t in texts for w in t.split()})

    async def embed(batch: list[str]) -> np.ndarray:
        vectors = np.array([[float(w in t.split()) for w in vocab] for t in batch])
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    pool = [0, 1, 2]  # chunk 3 is not in the pool
    neighbours = Neighbours(chunks, pool, await embed([chunks[i].content for i in pool]), embed)
    assert await neighbours.nearest(3, k=2) == [0, 1]  # closest first, its own document never
    assert await neighbours.nearest(0, k=2) == [1, 2]


async def test_by_default_one_distractor_word_is_enough_and_none_is_dropped(server: FakeOpenAI,
                                                                           corpus_dir: Path) -> None:
    base = make_responder()
    uses = {"count": 1}

    def respond(body: dict[str, Any]) -> Reply:
        if _task(body) == "adversarial":
            words = " and ".join(_offered(body)[:uses["count"]]) or "nothing new"
            return Reply.json({"question": f"With {words} in mind, is it true that "
                                           f"{_words(fenced_payload(body)['fact'], 8).lower()}?",
                               "distractor_terms": _offered(body)})
        return base(body)

    server.responder = respond
    kept = await _synth(server, corpus_dir, n=1, kinds=("adversarial",))
    assert kept.stats.written == 1 and len(kept.rows[0]["meta"]["distractor_terms"]) == 1
    uses["count"] = 0
    dropped = await _synth(server, corpus_dir, n=1, kinds=("adversarial",), max_attempts_factor=2)
    assert dropped.stats.written == 0 and dropped.stats.dropped["no_distractor_terms"] >= 1


async def test_questions_their_fact_does_not_answer_are_dropped(server: FakeOpenAI, corpus_dir: Path) -> None:
    # the rater says "not answered" for every question about the warranty: those rows never reach the set
    server.responder = make_responder(answered=lambda payload: "warranty" not in payload["question"].lower())
    result = await _synth(server, corpus_dir, n=20, kinds=("factoid", "adversarial"))
    assert result.stats.dropped["not_answered"] >= 1
    assert not any("warranty" in r["question"].lower() for r in result.rows) and result.rows
    checks = [r.body for r in server.chat_requests if _task(r.body) == "answer_check"]
    # the rater sees the question and the fact it was made from (fenced, as data), at temperature 0
    assert checks and all(set(fenced_payload(b)) == {"question", "fact"} for b in checks)
    assert all(b["temperature"] == 0.0 for b in checks)
    kept = {(r["question"], r["ground_truth_answer"]) for r in result.rows}
    asked = {(fenced_payload(b)["question"], fenced_payload(b)["fact"]) for b in checks}
    assert kept <= asked  # every kept row was checked against its own fact
    # the check runs before the realism rating: only questions that passed it are rated (an adversarial
    # rewrite that failed gets one retry, so it can be checked twice)
    passed = [b for b in checks if "warranty" not in fenced_payload(b)["question"].lower()]
    assert sum(result.stats.realism.values()) == len(passed) < len(checks)


async def test_multi_hop_answer_check_sees_both_facts_and_can_be_turned_off(server: FakeOpenAI, corpus_dir: Path,
                                                                           tmp_path: Path) -> None:
    server.responder = make_responder(answered=lambda payload: False)
    result = await _synth(server, corpus_dir, n=1, kinds=("multi_hop",), max_attempts_factor=2,
                          chunking=ChunkingConfig(256, 0, "paragraph"))
    assert result.stats.written == 0 and result.stats.dropped["not_answered"] >= 1
    check = next(r.body for r in server.chat_requests if _task(r.body) == "answer_check")
    assert set(fenced_payload(check)) == {"question", "facts"} and len(fenced_payload(check)["facts"]) == 2
    # --no-answer-check: no check calls, rows kept, provenance says unchecked
    before = len(server.chat_requests)
    out = tmp_path / "unchecked.jsonl"
    args = ["dataset", "synth", str(corpus_dir), "--n", "2", "--out", str(out), "--base-url", server.base_url,
            "--model", "gen", "--chunk-size", "48", "--no-answer-check"]
    assert await asyncio.to_thread(main, args) == 0
    assert "answer_check" not in {_task(r.body) for r in server.chat_requests[before:]}
    rows = load_golden_set(out).rows
    assert len(rows) == 2 and all(r.meta["answer_check_model"] is None for r in rows)


async def test_an_adversarial_rewrite_its_fact_does_not_answer_gets_one_retry(server: FakeOpenAI,
                                                                               corpus_dir: Path) -> None:
    base = make_responder(answered=lambda payload: not payload["question"].startswith("How do"))
    tries = {"first": 0}

    def respond(body: dict[str, Any]) -> Reply:
        if _task(body) == "adversarial" and len(body["messages"]) == 2:  # first try: asks about the words
            tries["first"] += 1
            terms = _offered(body)[:2]
            fact_words = _words(fenced_payload(body)["fact"], 8).lower()
            return Reply.json({"question": f"How do {' and '.join(terms)} change that {fact_words}?",
                               "distractor_terms": terms})
        return base(body)

    server.responder = respond
    result = await _synth(server, corpus_dir, n=1, kinds=("adversarial",))
    assert result.stats.written == 1 and not result.stats.dropped.get("not_answered")
    assert result.rows[0]["question"].startswith("With ")  # the retry's rewrite, checked again and kept
    retry = next(r.body for r in server.chat_requests
                 if _task(r.body) == "adversarial" and len(r.body["messages"]) == 4)
    assert retry["messages"][-1]["content"].startswith("The given fact does not answer your question")
    assert json.loads(retry["messages"][2]["content"])["question"].startswith("How do")
    # a rewrite the fact never answers, even after the retry: dropped as not_answered
    server.responder = make_responder(answered=lambda payload: "facts" in payload)  # two-fact (multi-hop) only
    dropped = await _synth(server, corpus_dir, n=1, kinds=("adversarial",), max_attempts_factor=2)
    assert dropped.stats.written == 0 and dropped.stats.dropped["not_answered"] >= 1
