"""Quality of ``ragmon dataset synth`` with a real local LLM on 60 SciFact chunks.

Measures, for plain (factoid) and adversarial questions generated from the same sampled chunks
(same seed, so the same chunk order): the share of candidates that became valid questions, the
realism ratings (every question is rated; none dropped: ``min_realism`` 1), tokens per question,
and BM25 hit@1/hit@5 of the gold chunk (BM25 over every chunk of the corpus, same chunking). The
adversarial questions must be measurably harder: each adversarial question is a rewrite of a plain
question generated from the same fact of the same chunk (kept in ``meta.base_question``), so the
two are paired exactly; the paired bootstrap 95 % interval of hit@1(plain) − hit@1(adversarial)
must lie above 0.

Every question is checked by the rater (``answer-check/v1``: do its fact(s) answer it?) before the
realism rating, as ``ragmon dataset synth`` does by default; ``--hand-labels FILE`` first measures
that check against questions read by hand (``docs/synth-adversarial-check.jsonl``: rewrites of an
earlier run, each labelled whether its fact still answers it) and reports the agreement.

Each kind's rows and statistics are saved as they finish (``--out`` stem + ``.<kind>.json``);
``--reuse`` takes a kind from there instead of generating it again (same prompt versions only).
Saved rows made before the answer check existed get it applied here (one call per row; the rows it
rejects count as ``not_answered``), which is what generation would have done: the check sits
between the fact/question call and the realism rating and changes neither.

    # the local LLM of bench/judge_llm.py (llama-cpp-python's OpenAI-compatible server, a GGUF file):
    python bench/synth_quality.py --gguf .cache/llm-bench/qwen.gguf --server-python .cache/llm-bench/venv/bin/python
    # or any running OpenAI-compatible endpoint:
    python bench/synth_quality.py --base-url http://127.0.0.1:8080/v1 --model qwen

Writes the ``synth-quality`` section of docs/benchmarks.md (``--no-docs``: print only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.judge_llm import start_server  # noqa: E402
from bench.retrievers.datasets import load_scifact_corpus  # noqa: E402
from bench.retrievers.harness import machine_line, write_section  # noqa: E402
from ragmon.datasets import prompts as synth_prompts  # noqa: E402
from ragmon.datasets.chunking import ChunkingConfig, chunk_corpus  # noqa: E402
from ragmon.datasets.corpus import CorpusDoc  # noqa: E402
from ragmon.datasets.retrievers import Bm25Index, Doc  # noqa: E402
from ragmon.datasets.synth import Synthesizer, SynthOptions  # noqa: E402
from ragmon.datasets.synth_options import Drop  # noqa: E402
from ragmon.scoring.llm import LlmJudgeSettings  # noqa: E402

CHUNKING = ChunkingConfig(256, 0, "paragraph")
REUSED: dict[str, str] = {}  # kind -> where its saved rows came from, when not from this run


def _synthesizer(base_url: str, model: str, kind: str, n: int, timeout_s: float,
                 distractor_pool: int) -> Synthesizer:
    settings = LlmJudgeSettings(base_url=base_url, model=model, timeout_s=timeout_s, concurrency=1,
                                max_completion_tokens=256)
    # max_attempts_factor 1: exactly --chunks candidates, one per chunk
    options = SynthOptions(n=n, kinds=(kind,), generator_model=model, min_realism=1, chunking=CHUNKING, seed=0,
                           max_attempts_factor=1, distractor_pool=distractor_pool)
    return Synthesizer(settings, options)


async def generate(base_url: str, model: str, docs: list[CorpusDoc], kind: str, n: int, timeout_s: float,
                   distractor_pool: int) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    started = time.perf_counter()
    async with _synthesizer(base_url, model, kind, n, timeout_s, distractor_pool) as synthesizer:
        result = await synthesizer.run(docs)
    return result.rows, result.stats.as_dict(), time.perf_counter() - started


async def check_answers(base_url: str, model: str, pairs: list[tuple[str, str]],
                        timeout_s: float) -> tuple[list[bool | None], dict[str, int]]:
    """The answer check on (question, fact) pairs: True/False, None where the rater failed; and tokens used."""
    out: list[bool | None] = []
    async with _synthesizer(base_url, model, "factoid", 1, timeout_s, 1) as synthesizer:
        for question, fact in pairs:
            try:
                out.append(await synthesizer.fact_answers(question, [fact]))
            except Drop:
                out.append(None)
        usage = synthesizer.stats.usage
    return out, {"calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                 "completion_tokens": usage.completion_tokens}


def apply_answer_check(args: argparse.Namespace, base_url: str, rows: list[dict[str, Any]],
                       stats: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    """Saved rows from before the answer check: check them now, as generation would have."""
    started = time.perf_counter()
    verdicts, usage = asyncio.run(check_answers(base_url, args.model, [(r["question"], r["ground_truth_answer"])
                                                                       for r in rows], args.timeout_s))
    kept = []
    dropped = Counter(stats["dropped"])
    for row, verdict in zip(rows, verdicts, strict=True):
        if verdict:
            row["meta"].update(answer_check_model=args.model,
                               answer_check_prompt_version=synth_prompts.ANSWER_CHECK_VERSION)
            kept.append(row)
        else:
            dropped["not_answered" if verdict is False else "invalid_reply"] += 1
    stats = {**stats, "written": len(kept), "dropped": dict(dropped),
             "prompt_tokens": stats["prompt_tokens"] + usage["prompt_tokens"],
             "completion_tokens": stats["completion_tokens"] + usage["completion_tokens"]}
    return kept, stats, time.perf_counter() - started


def hand_label_agreement(args: argparse.Namespace, base_url: str, path: Path) -> dict[str, Any]:
    """The answer check against questions labelled by hand: does the fact still answer the question?"""
    labelled = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs = [(r["adversarial_question"], r["fact"]) for r in labelled]
    verdicts, _usage = asyncio.run(check_answers(base_url, args.model, pairs, args.timeout_s))
    counts = Counter((bool(r["still_answered_by_fact_hand"]), v) for r, v in zip(labelled, verdicts, strict=True))
    return {"rows": len(labelled), "file": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
            "both_yes": counts[(True, True)], "hand_yes_check_no": counts[(True, False)],
            "hand_no_check_yes": counts[(False, True)], "both_no": counts[(False, False)],
            "check_failed": counts[(True, None)] + counts[(False, None)],
            "verdicts": [{"id": r["id"], "hand": r["still_answered_by_fact_hand"], "check": v}
                         for r, v in zip(labelled, verdicts, strict=True)]}


def gold_rank(index: Bm25Index, question: str, gold: str, k: int = 5) -> int | None:
    """1-based rank of the gold chunk among BM25's top k, else None."""
    for rank, (doc, _score) in enumerate(index.search(question, k), start=1):
        if doc.id == gold:
            return rank
    return None


def hits(index: Bm25Index, rows: list[dict[str, Any]], field: str = "question") -> dict[str, list[float]]:
    """Per row: [hit@1, hit@5] of its gold chunk for ``row[field]`` (or ``row["meta"][field]``)."""
    out = {}
    for row in rows:
        question = row[field] if field in row else row["meta"][field]
        rank = gold_rank(index, question, row["ground_truth_docs"][0])
        out[row["id"]] = [1.0 if rank == 1 else 0.0, 1.0 if rank is not None else 0.0]
    return out


def bootstrap(values: list[float], resamples: int = 2000) -> tuple[float, float, float]:
    """Mean and percentile bootstrap 95 % interval."""
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(resamples))
    return statistics.fmean(values), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def paired_difference(a: list[float], b: list[float], resamples: int = 2000) -> tuple[float, float, float]:
    return bootstrap([x - y for x, y in zip(a, b, strict=True)], resamples)


def summary(name: str, rows: list[dict[str, Any]], stats: dict[str, Any], row_hits: dict[str, list[float]],
            wall: float) -> dict[str, Any]:
    written = max(1, stats["written"])
    h1 = [v[0] for v in row_hits.values()]
    return {
        "kind": name, "candidates": stats["candidates"], "valid": stats["written"],
        "valid_share": stats["written"] / max(1, stats["candidates"]), "dropped": stats["dropped"],
        # the ratings of the valid questions (every one is rated; saved rows from before the answer
        # check were rated before it, so the run's own counts would include rows it dropped)
        "realism": dict(Counter(str(r["meta"]["realism"]) for r in rows if r["meta"].get("realism") is not None)),
        "realism_mean": statistics.fmean(r["meta"]["realism"] for r in rows) if rows else None,
        "tokens_per_question": (stats["prompt_tokens"] + stats["completion_tokens"]) / written,
        "hit@1": bootstrap(h1) if h1 else None,
        "hit@5": statistics.fmean(v[1] for v in row_hits.values()) if row_hits else None,
        "wall_s_per_question": wall / written,
    }


def interval(value: tuple[float, float, float] | None) -> str:
    return "–" if value is None else f"{value[0]:.3f} [{value[1]:.2f}, {value[2]:.2f}]"


def drops(dropped: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(dropped.items(), key=lambda kv: -kv[1]) if v) or "–"


def generate_or_reuse(args: argparse.Namespace, base_url: str | None, docs: list[CorpusDoc],
                      kind: str) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    saved = Path(args.out).with_suffix(f".{kind}.json")
    version = {"factoid": synth_prompts.FACT_VERSION, "adversarial": synth_prompts.ADVERSARIAL_VERSION}[kind]
    if args.reuse and saved.exists():
        data = json.loads(saved.read_text(encoding="utf-8"))
        if data.get("prompt_version") == version and data.get("chunks") == args.chunks:
            print(f"{kind}: reusing {saved}", file=sys.stderr)
            if data.get("provenance"):
                REUSED[kind] = data["provenance"]
            rows, stats, wall = data["rows"], data["stats"], data["wall_s"]
            if data.get("answer_check_version") != synth_prompts.ANSWER_CHECK_VERSION:
                if base_url is None:
                    raise SystemExit(f"{kind}: {saved} predates the answer check; give --base-url or --gguf")
                rows, stats, extra = apply_answer_check(args, base_url, rows, stats)
                wall += extra
                REUSED[kind] = (f"{REUSED.get(kind, str(saved.name))}, answer check "
                                f"({synth_prompts.ANSWER_CHECK_VERSION}) applied in a later run")
                saved.write_text(json.dumps({**data, "rows": rows, "stats": stats, "wall_s": wall, "provenance":
                                             REUSED[kind], "answer_check_version": synth_prompts.ANSWER_CHECK_VERSION}),
                                 encoding="utf-8")
            return rows, stats, wall
    if base_url is None:
        raise SystemExit(f"{kind}: nothing to reuse in {saved}; give --base-url or --gguf")
    rows, stats, wall = asyncio.run(generate(base_url, args.model, docs, kind, args.chunks, args.timeout_s,
                                                 args.distractor_pool))
    saved.write_text(json.dumps({"prompt_version": version, "chunks": args.chunks, "rows": rows, "stats": stats,
                                 "wall_s": wall, "answer_check_version": synth_prompts.ANSWER_CHECK_VERSION}),
                     encoding="utf-8")
    return rows, stats, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="a running OpenAI-compatible endpoint (else --gguf starts one)")
    parser.add_argument("--gguf", help="GGUF model file to serve with llama_cpp.server")
    parser.add_argument("--server-python", default=sys.executable)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--chunks", type=int, default=60)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--out", default=str(ROOT / ".cache" / "llm-bench" / "synth.jsonl"))
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--distractor-pool", type=int, default=3000, help="chunks embedded up front as "
                        "distractor candidates (SynthOptions.distractor_pool)")
    parser.add_argument("--reuse", action="store_true", help="take a kind's saved rows when they exist")
    parser.add_argument("--hand-labels", type=Path, default=None, help="JSONL of hand-labelled rewrites "
                        "(docs/synth-adversarial-check.jsonl): measure the answer check against them first")
    parser.add_argument("--server-cache", action="store_true",
                        help="--gguf: the server keeps prompt states, so each prompt's fixed task text is read once")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("ragmon.datasets.synth").setLevel(logging.DEBUG)  # why each rewrite was dropped
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    docs = [CorpusDoc(d.id, d.title, d.text) for d in load_scifact_corpus()]
    proc = None
    base_url = args.base_url
    if base_url is None and args.gguf:
        proc, base_url = start_server(args)
    agreement: dict[str, Any] | None = None
    saved_agreement = Path(args.out).with_suffix(".hand-labels.json")
    try:
        if args.hand_labels and args.reuse and saved_agreement.exists():
            agreement = json.loads(saved_agreement.read_text(encoding="utf-8"))
        elif args.hand_labels:
            if base_url is None:
                raise SystemExit("--hand-labels needs --base-url or --gguf")
            agreement = hand_label_agreement(args, base_url, args.hand_labels)
            saved_agreement.write_text(json.dumps(agreement, indent=1), encoding="utf-8")
        # the adversarial kind first: it answers the question; each row carries its plain twin
        adversarial = generate_or_reuse(args, base_url, docs, "adversarial")
        plain = generate_or_reuse(args, base_url, docs, "factoid")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    chunks = chunk_corpus(docs, CHUNKING)
    index = Bm25Index([Doc(c.id, "", c.content) for c in chunks])
    hits_plain, hits_adv = hits(index, plain[0]), hits(index, adversarial[0])
    hits_twin = hits(index, adversarial[0], "base_question")
    ids = sorted(hits_adv)
    diff = paired_difference([hits_twin[i][0] for i in ids], [hits_adv[i][0] for i in ids]) if ids else None
    results = [summary("factoid", plain[0], plain[1], hits_plain, plain[2]),
               summary("adversarial", adversarial[0], adversarial[1], hits_adv, adversarial[2])]
    twin = bootstrap([hits_twin[i][0] for i in ids]) if ids else None
    # what `ragmon dataset synth` keeps by default: realism >= 4
    kept = sorted(r["id"] for r in adversarial[0] if (r["meta"].get("realism") or 0) >= 4)
    diff_kept = paired_difference([hits_twin[i][0] for i in kept], [hits_adv[i][0] for i in kept]) if kept else None
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in plain[0] + adversarial[0]), encoding="utf-8")
    # the per-kind statistics (drop reasons included) beside the rows, for a look after the run
    Path(args.out).with_suffix(".summary.json").write_text(
        json.dumps({"results": results, "paired_difference": diff, "paired_rows": len(ids),
                    "plain_twin_hit@1": twin, "paired_difference_realism4": diff_kept,
                    "paired_rows_realism4": len(kept), "reused": REUSED, "answer_check_vs_hand": agreement},
                   indent=1), encoding="utf-8")
    lines = ["| kind | candidates | valid | valid share | realism 1/2/3/4/5 | mean realism | tokens / question | "
             "BM25 hit@1 [95 % CI] | BM25 hit@5 | drops | wall s / question |",
             "|---|---:|---:|---:|---|---:|---:|---|---:|---|---:|"]
    for r in results:
        dist = "/".join(str(Counter({int(k): v for k, v in r["realism"].items()})[i]) for i in range(1, 6))
        lines.append(f"| {r['kind']} | {r['candidates']} | {r['valid']} | {r['valid_share']:.2f} | {dist} | "
                     f"{r['realism_mean'] or 0:.2f} | {r['tokens_per_question']:.0f} | {interval(r['hit@1'])} | "
                     f"{r['hit@5'] or 0:.3f} | {drops(r['dropped'])} | {r['wall_s_per_question']:.1f} |")
    verdict = "no adversarial row" if diff is None else (
        f"Paired on the {len(ids)} adversarial questions and the plain questions they were rewritten from (same "
        f"fact, same gold chunk): hit@1 plain {interval(twin)} vs adversarial {interval(results[1]['hit@1'])}; "
        f"difference {diff[0]:+.3f}, 95 % CI [{diff[1]:+.3f}, {diff[2]:+.3f}] — adversarial measurably harder: "
        f"**{'yes' if diff[1] > 0 else 'no'}**")
    if diff_kept is not None:
        verdict += (f". Only the {len(kept)} rated realistic (4–5, what `synth` keeps by default): difference "
                    f"{diff_kept[0]:+.3f}, 95 % CI [{diff_kept[1]:+.3f}, {diff_kept[2]:+.3f}]")
    reused = [f"{kind} rows reused from {where}" for kind, where in REUSED.items()]
    if agreement is not None:
        a = agreement
        verdict += (f". The answer check ({synth_prompts.ANSWER_CHECK_VERSION}, same model) against {a['rows']} "
                    f"rewrites read by hand ({a['file']}): fact answers it by hand and by the check "
                    f"{a['both_yes']}, by hand only {a['hand_yes_check_no']}, by the check only "
                    f"{a['hand_no_check_yes']}, by neither {a['both_no']}"
                    + (f", check failed {a['check_failed']}" if a["check_failed"] else ""))
    body = "\n".join(["## Synthetic questions (real local LLM)", "", f"`python bench/synth_quality.py` with "
                      f"{args.model}, {args.chunks} SciFact chunks (paragraph mode, 256 tokens).", "", *lines, "",
                      verdict + ".", *(["", "; ".join(reused) + "."] if reused else []), "", machine_line() + "."])
    print(body)
    if not args.no_docs:
        write_section("synth-quality", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
