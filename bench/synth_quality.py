"""Quality of ``ragmon dataset synth`` with a real local LLM on 60 SciFact chunks.

Measures, for plain (factoid) and adversarial questions generated from the same sampled chunks
(same seed, so the same chunk order): the share of candidates that became valid questions, the
realism ratings (every question is rated; none dropped: ``min_realism`` 1), tokens per question,
and BM25 hit@1 of the gold chunk (BM25 over every chunk of the corpus, same chunking). The
adversarial questions must be measurably harder: the paired bootstrap 95 % interval of
hit@1(plain) − hit@1(adversarial), over the chunks that got both, must lie above 0.

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
from ragmon.datasets.chunking import ChunkingConfig, chunk_corpus  # noqa: E402
from ragmon.datasets.corpus import CorpusDoc  # noqa: E402
from ragmon.datasets.retrievers import Bm25Index, Doc  # noqa: E402
from ragmon.datasets.synth import Synthesizer, SynthOptions  # noqa: E402
from ragmon.scoring.llm import LlmJudgeSettings  # noqa: E402

CHUNKING = ChunkingConfig(256, 0, "paragraph")


async def generate(base_url: str, model: str, docs: list[CorpusDoc], kind: str, n: int,
                   timeout_s: float) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    settings = LlmJudgeSettings(base_url=base_url, model=model, timeout_s=timeout_s, concurrency=1,
                                max_completion_tokens=256)
    options = SynthOptions(n=n, kinds=(kind,), generator_model=model, min_realism=1, chunking=CHUNKING, seed=0,
                           max_attempts_factor=2)
    started = time.perf_counter()
    async with Synthesizer(settings, options) as synthesizer:
        result = await synthesizer.run(docs)
    return result.rows, result.stats.as_dict(), time.perf_counter() - started


def hit_at_1(index: Bm25Index, rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for row in rows:
        gold = row["ground_truth_docs"][0]
        top = index.search(row["question"], 1)
        out[gold] = 1.0 if top and top[0][0].id == gold else 0.0
    return out


def paired_difference(a: list[float], b: list[float], resamples: int = 2000) -> tuple[float, float, float]:
    rng = random.Random(0)
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(resamples))
    return statistics.fmean(diffs), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def summary(name: str, rows: list[dict[str, Any]], stats: dict[str, Any], hits: dict[str, float],
            wall: float) -> dict[str, Any]:
    written = max(1, stats["written"])
    return {
        "kind": name, "candidates": stats["candidates"], "valid": stats["written"],
        "valid_share": stats["written"] / max(1, stats["candidates"]), "dropped": stats["dropped"],
        "realism": stats["realism"],
        "realism_mean": statistics.fmean(r["meta"]["realism"] for r in rows) if rows else None,
        "tokens_per_question": (stats["prompt_tokens"] + stats["completion_tokens"]) / written,
        "hit@1": statistics.fmean(hits.values()) if hits else None, "wall_s_per_question": wall / written,
    }


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
    args = parser.parse_args(argv)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    docs = [CorpusDoc(d.id, d.title, d.text) for d in load_scifact_corpus()]
    proc = None
    base_url = args.base_url
    if base_url is None:
        if not args.gguf:
            parser.error("give --base-url or --gguf")
        proc, base_url = start_server(args)
    try:
        plain = asyncio.run(generate(base_url, args.model, docs, "factoid", args.chunks, args.timeout_s))
        adversarial = asyncio.run(generate(base_url, args.model, docs, "adversarial", args.chunks, args.timeout_s))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    chunks = chunk_corpus(docs, CHUNKING)
    index = Bm25Index([Doc(c.id, "", c.content) for c in chunks])
    hits_plain, hits_adv = hit_at_1(index, plain[0]), hit_at_1(index, adversarial[0])
    both = sorted(set(hits_plain) & set(hits_adv))
    diff = paired_difference([hits_plain[c] for c in both], [hits_adv[c] for c in both]) if both else None
    results = [summary("factoid", plain[0], plain[1], hits_plain, plain[2]),
               summary("adversarial", adversarial[0], adversarial[1], hits_adv, adversarial[2])]
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in plain[0] + adversarial[0]), encoding="utf-8")
    # the per-kind statistics (drop reasons included) beside the rows, for a look after the run
    Path(args.out).with_suffix(".summary.json").write_text(
        json.dumps({"results": results, "paired_difference": diff, "paired_chunks": len(both)}, indent=1),
        encoding="utf-8")
    lines = ["| kind | candidates | valid | valid share | realism 1/2/3/4/5 | mean realism | tokens / question | "
             "BM25 hit@1 | wall s / question |", "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in results:
        dist = "/".join(str(Counter({int(k): v for k, v in r["realism"].items()})[i]) for i in range(1, 6))
        lines.append(f"| {r['kind']} | {r['candidates']} | {r['valid']} | {r['valid_share']:.2f} | {dist} | "
                     f"{r['realism_mean'] or 0:.2f} | {r['tokens_per_question']:.0f} | {r['hit@1'] or 0:.3f} | "
                     f"{r['wall_s_per_question']:.1f} |")
    verdict = "no paired chunks" if diff is None else (
        f"paired on {len(both)} chunks: hit@1(plain) − hit@1(adversarial) = {diff[0]:+.3f}, 95 % CI "
        f"[{diff[1]:+.3f}, {diff[2]:+.3f}] — adversarial measurably harder: **{'yes' if diff[1] > 0 else 'no'}**")
    body = "\n".join(["## Synthetic questions (real local LLM)", "", f"`python bench/synth_quality.py` with "
                      f"{args.model}, {args.chunks} SciFact chunks (paragraph mode, 256 tokens).", "", *lines, "",
                      verdict + ".", "", machine_line() + "."])
    print(body)
    if not args.no_docs:
        write_section("synth-quality", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
