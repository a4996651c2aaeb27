"""Throughput of the offline local judge, with the per-stage split.

    python bench/judge_local.py [--traces 120] [--threads 2] [--no-write]

Typical traces: 4 contexts of ~150 words and a ~120-word answer, built from the RAGTruth QA
dev rows (their own passages re-cut into 150-word contexts). Four runs:

- cold: every context is new to the judge (its sentence-embedding cache cannot help);
- warm: the same documents come back (a popular knowledge base): the cache serves them;
- concurrent: cold traces scored by ``--threads`` worker threads, as the agent does;
- float32: cold, with the model's matrix products in float32 (``LocalJudge(int8=False)``).

The stage split (split / embed / evidence / combine) is measured by the judge itself. The
machine is shared, so the load average is printed next to the numbers. Results replace the
"Local judge" section of docs/benchmarks.md unless --no-write.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchdata import benchdata_file  # noqa: E402
from ragmon.scoring.local import STAGES, LocalJudge  # noqa: E402

DATA = "ragtruth_qa_dev.jsonl"  # bench data (bench/_benchdata.py)
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- local-judge:start -->", "<!-- local-judge:end -->"

Trace = tuple[str, list[str], str]


def typical_traces(n: int, words_per_context: int = 150, contexts: int = 4) -> list[Trace]:
    rows = [json.loads(line) for line in benchdata_file(DATA).read_text(encoding="utf-8").splitlines() if line.strip()]
    pool_words = [w for r in rows for c in r["contexts"] for w in c.split()]
    out: list[Trace] = []
    cursor = 0
    for i in range(n):
        row = rows[i % len(rows)]
        ctxs = []
        own = " ".join(row["contexts"]).split()
        for k in range(contexts):
            # the row's own passages first, then other passages, so each trace's text is unique
            chunk = own[k * words_per_context : (k + 1) * words_per_context]
            if len(chunk) < words_per_context:
                need = words_per_context - len(chunk)
                chunk += pool_words[cursor : cursor + need]
                cursor = (cursor + need) % max(1, len(pool_words) - words_per_context)
            ctxs.append(" ".join(chunk))
        out.append((row["question"], ctxs, row["answer"]))
    return out


def _reset(judge: LocalJudge) -> None:
    judge.stage_seconds = dict.fromkeys(STAGES, 0.0)


def run_sequential(judge: LocalJudge, traces: list[Trace]) -> tuple[float, float, dict[str, float]]:
    """(traces/s wall, CPU ms per trace, stage ms per trace)."""
    _reset(judge)
    start, cpu_start = time.perf_counter(), time.process_time()
    for q, c, a in traces:
        judge.score_sync(q, c, a)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    stages = {k: v / len(traces) * 1000 for k, v in judge.stage_seconds.items()}
    return len(traces) / elapsed, cpu / len(traces) * 1000, stages


def run_concurrent(judge: LocalJudge, traces: list[Trace], threads: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda t: judge.score_sync(*t), traces))
    return len(traces) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=120)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    judge = LocalJudge(cache_size=0)
    load_s = time.perf_counter() - t0
    traces = typical_traces(args.traces)
    words = sum(len(" ".join(c).split()) for _, c, _ in traces) / len(traces)
    answer_words = sum(len(a.split()) for _, _, a in traces) / len(traces)
    judge.score_sync(*traces[0])  # warm-up: onnxruntime allocations, regex compilation

    cold_tps, cold_cpu, cold_stages = run_sequential(judge, traces)
    float_judge = LocalJudge(cache_size=0, int8=False)
    float_judge.score_sync(*traces[0])
    float_tps, float_cpu, _ = run_sequential(float_judge, traces)
    warm_judge = LocalJudge(cache_size=50_000)
    run_sequential(warm_judge, traces)  # fills the cache
    warm_tps, warm_cpu, warm_stages = run_sequential(warm_judge, traces)
    conc_tps = run_concurrent(LocalJudge(cache_size=0), traces, args.threads)
    load_after = os.getloadavg()

    total = sum(cold_stages.values())
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with `python bench/judge_local.py "
        f"--traces {args.traces} --threads {args.threads}` on {os.cpu_count()} CPU cores "
        f"({platform.processor() or platform.machine()}), Python {platform.python_version()}; load average "
        f"{load_before[0]:.1f} before / {load_after[0]:.1f} after (a shared machine: other work competes).",
        "",
        f"Traces: {len(traces)} typical traces, 4 contexts of ~150 words ({words:.0f} words of context) and a "
        f"~{answer_words:.0f}-word answer (RAGTruth QA passages re-cut). Model load: {load_s:.2f}s once.",
        "",
        "| run | traces/s (wall) | ms/trace (wall) | CPU ms/trace | traces/s per free core (1000 / CPU ms) |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| cold cache, 1 thread | {cold_tps:.1f} | {1000 / cold_tps:.0f} | {cold_cpu:.0f} | {1000 / cold_cpu:.1f} |",
        f"| warm cache (documents seen before), 1 thread | {warm_tps:.1f} | {1000 / warm_tps:.0f} | {warm_cpu:.0f} | "
        f"{1000 / warm_cpu:.1f} |",
        f"| cold cache, {args.threads} threads | {conc_tps:.1f} | {1000 / conc_tps:.0f} | | |",
        f"| cold cache, 1 thread, float32 path (`LocalJudge(int8=False)`) | {float_tps:.1f} | {1000 / float_tps:.0f} | "
        f"{float_cpu:.0f} | {1000 / float_cpu:.1f} |",
        "",
        "Per-stage split (cold, 1 thread; ms per trace):",
        "",
        "| stage | ms | share | warm cache ms |",
        "| --- | ---: | ---: | ---: |",
    ]
    for stage in STAGES:
        lines.append(f"| {stage} | {cold_stages[stage]:.1f} | {cold_stages[stage] / total:.0%} | "
                     f"{warm_stages[stage]:.1f} |")
    best_wall = max(cold_tps, conc_tps)
    capacity = 2000 / cold_cpu  # both cores, cold cache, if nothing else ran
    lines += [
        "",
        f"Goal: <= 100 CPU ms per typical trace on one thread (stretch 50). Measured, cold cache: {cold_cpu:.0f} ms "
        f"({'meets' if cold_cpu <= 100 else 'misses'} it); wall clock {best_wall:.1f} traces/s under this load, "
        f"about {capacity:.1f}/s on two otherwise idle cores (2 × 1000 / CPU ms, not measured). "
        "Embedding is the dominant stage: the model reads every "
        "embedded sentence once, in batches cut by token length (`embedder.length_buckets`: padding against "
        "runs), with its matrix products on int8 kernels (`scoring/local/onnx_int8.py`: the bundled int8 weights, "
        "activations quantized with fixed calibrated ranges); the CPU cost follows the tokens embedded. The "
        "sentence cache (on by default: 8192 sentences or 64 MiB with their token states) is what makes "
        "repeated documents cheap.",
    ]
    section = "\n".join(lines)
    print(section)
    if not args.no_write:
        write_section(section)
    return 0


def write_section(body: str) -> None:
    block = f"{START}\n## Local judge\n\n{body}\n{END}"
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Benchmarks\n"
    if START in text and END in text:
        text = re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
