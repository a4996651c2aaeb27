"""The LLM judge on the cross-dataset table: compact vs parity mode vs the local judge, same rows.

Every dev set x metric of ``bench/judge_fidelity.py`` (faithfulness on RAGTruth QA, summaries,
data-to-text and WiCE; answer relevancy on RAGTruth QA with constructed negatives; context
relevance on single WikiQA sentences) gets a deterministic, label-balanced slice of ``--rows``
rows (order: sha256 of the row's text, labels interleaved). The LLM judge scores each row in each
mode against a real OpenAI-compatible server (the local llama-cpp setup of ``bench/judge_llm.py``
by default); the local judge scores the same rows, so the three columns compare like with like.

The run goes round-robin over the sets (one row of each set in turn), appends every result to a
JSONL file and resumes from it, so a time-limited run (``--time-budget-s``) still covers every set
evenly and a later run continues it. Results made with another prompt version are not reused.

    python bench/judge_llm_table.py --gguf .cache/llm-bench/qwen.gguf \
        --server-python .cache/llm-bench/venv/bin/python --rows 60 --time-budget-s 3600
    python bench/judge_llm_table.py --report-only      # the table from what is recorded so far

Scores read per metric: faithfulness (an answer without claims counts 1.0, as in
``bench/judge_llm.py``); answer relevancy; context relevance = the judge's verdict on the single
context (1.0 relevant, 0.0 not). Columns: n scored (failures), ROC AUC with a bootstrap 95 %
interval, balanced accuracy at the default threshold 0.5, best balanced accuracy over thresholds.
The markdown goes to docs/judges.md between ``<!-- llm-table:start -->`` and ``<!-- llm-table:end -->``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from judge_fidelity import Case, extract, load_cases, row_stats  # noqa: E402
from judge_llm import build_judges, prompt_version, start_server  # noqa: E402
from retrievers.harness import machine_line, write_section  # noqa: E402

from ragmon import semconv as sc  # noqa: E402
from ragmon.errors import JudgeError  # noqa: E402
from ragmon.scoring.local import LocalJudge  # noqa: E402
from ragmon.types import Document, RagTrace  # noqa: E402

DOC = ROOT / "docs" / "judges.md"
# (set, metric) slices, in the order rows are taken round-robin
SLICES = (
    ("ragtruth_qa", "faithfulness"),
    ("ragtruth_summary", "faithfulness"),
    ("ragtruth_data2txt", "faithfulness"),
    ("wice", "faithfulness"),
    ("ragtruth_qa_relevancy", "answer_relevancy"),
    ("wikiqa_single", "context_relevance"),
)


def case_key(c: Case) -> str:
    text = json.dumps([c.set, c.metric, c.question, c.contexts, c.answer, c.kind], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def select_slice(cases: Sequence[Case], set_name: str, metric: str, n: int) -> list[Case]:
    """``n`` rows, half of each label (WiCE's partially supported claims left out), in hash order."""
    rows = [c for c in cases if c.set == set_name and c.metric == metric and c.kind != "partial"]
    rows.sort(key=case_key)
    neg = [c for c in rows if c.label == 0][: n // 2]
    pos = [c for c in rows if c.label == 1][: n - len(neg)]
    out: list[Case] = []
    for i in range(max(len(neg), len(pos))):  # interleave so a partial run stays balanced
        out.extend(x[i] for x in (neg, pos) if i < len(x))
    return out


def round_robin(slices: dict[str, list[Case]]) -> list[Case]:
    out: list[Case] = []
    for i in range(max(len(v) for v in slices.values())):
        out.extend(v[i] for v in slices.values() if i < len(v))
    return out


def to_trace(c: Case) -> RagTrace:
    key = case_key(c)
    docs = tuple(Document(id=f"{key}-{i}", content=t, rank=i) for i, t in enumerate(c.contexts))
    # summaries, data-to-text and WiCE have no question: the judge sees an empty one, as the agent would
    return RagTrace(trace_id=hashlib.sha256(key.encode()).hexdigest()[:32], service="bench", pipeline=c.set,
                    question=c.question or "", answer=c.answer or "", documents=docs)


def metric_score(c: Case, values: dict[str, float | None], context_relevant: Sequence[Any] | None) -> float | None:
    if c.metric == "faithfulness":
        v = values.get(sc.METRIC_FAITHFULNESS)
        return 1.0 if v is None else float(v)  # no claims: nothing unsupported
    if c.metric == "answer_relevancy":
        v = values.get(sc.METRIC_ANSWER_RELEVANCY)
        return None if v is None else float(v)
    if context_relevant:
        return float(context_relevant[0])
    return None


def local_score(judge: LocalJudge, c: Case) -> float | None:
    feats = extract(judge, c)
    if c.metric == "context_relevance":
        r = feats["context_relevance"]
        return float(r[0]) if r else None
    return metric_score(c, feats["values"], None)


async def run(args: argparse.Namespace, base_url: str | None, rows: list[Case]) -> list[dict[str, Any]]:
    out = Path(args.out)
    modes = [m for m in args.modes.split(",") if m]
    done: list[dict[str, Any]] = []
    if out.exists():
        done = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        done = [r for r in done if r["mode"] == "local" or r.get("prompt") == prompt_version(r["mode"])]
    seen = {(r["key"], r["mode"]) for r in done}

    def record(rec: dict[str, Any]) -> None:
        done.append(rec)
        with out.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")

    local = LocalJudge(cache_size=0)
    for c in rows:  # the local judge first: cheap, and the comparison column is then complete
        if (case_key(c), "local") not in seen:
            record({"key": case_key(c), "set": c.set, "metric": c.metric, "label": c.label, "kind": c.kind,
                    "mode": "local", "score": local_score(local, c)})
    if base_url is None:
        return done
    judges = build_judges(args, base_url, modes)
    deadline = time.monotonic() + args.time_budget_s if args.time_budget_s else None
    try:
        for c in rows:
            for mode in modes:
                if (case_key(c), mode) in seen:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    print("time budget reached; stopping (resume later with the same --out)", file=sys.stderr)
                    return done
                rec: dict[str, Any] = {"key": case_key(c), "set": c.set, "metric": c.metric, "label": c.label,
                                       "kind": c.kind, "mode": mode, "prompt": prompt_version(mode)}
                started = time.perf_counter()
                try:
                    scores = await judges[mode].score(to_trace(c))
                    values = {name: scores.get(name) for name in (sc.METRIC_FAITHFULNESS,
                                                                  sc.METRIC_ANSWER_RELEVANCY)}
                    rec.update(score=metric_score(c, values, scores.details.get("context_relevant")),
                               calls=scores.details.get("calls", 0), prompt_tokens=scores.prompt_tokens,
                               completion_tokens=scores.completion_tokens,
                               claims=scores.details.get("claims", []), error=None)
                except JudgeError as exc:
                    rec.update(score=None, calls=0, prompt_tokens=0, completion_tokens=0, error=exc.reason,
                               message=str(exc)[:200])
                rec["wall_s"] = round(time.perf_counter() - started, 2)
                record(rec)
                print(json.dumps({k: v for k, v in rec.items() if k != "claims"}), file=sys.stderr)
    finally:
        for judge in judges.values():
            await judge.aclose()
    return done


def report(results: list[dict[str, Any]], modes: Sequence[str], boot: int) -> list[str]:
    lines = [
        "| set | metric | judge | n scored (failed) | AUC [95 % CI] | bal. acc. @0.5 | best bal. acc. "
        "| tokens / row | wall s / row |",
        "|---|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for set_name, metric in SLICES:
        for mode in ("local", *modes):
            mine = [r for r in results if r["set"] == set_name and r["metric"] == metric and r["mode"] == mode]
            if mode != "local":  # compare on the rows every LLM mode has answered
                answered = [{r["key"] for r in results if r["set"] == set_name and r["mode"] == m} for m in modes]
                common = set.intersection(*answered) if answered else set()
                mine = [r for r in mine if r["key"] in common]
            ok = [r for r in mine if r.get("score") is not None]
            failed = Counter(r.get("error") or "no score" for r in mine if r.get("score") is None)
            if len({r["label"] for r in ok}) < 2:
                continue
            st = row_stats([r["label"] for r in ok], [r["score"] for r in ok], boot)
            tokens = [r["prompt_tokens"] + r["completion_tokens"] for r in mine if mode != "local"]
            walls = [r["wall_s"] for r in mine if mode != "local"]
            fail = ", ".join(f"{k} {v}" for k, v in failed.items()) or "0"
            lines.append(
                f"| {set_name} | {metric} | {mode} | {st['n']} ({fail}) | {st['auc']:.3f} "
                f"[{st['auc_ci'][0]:.2f}, {st['auc_ci'][1]:.2f}] | {st['ba']:.3f} | {st['best_ba']:.3f} "
                f"| {sum(tokens) / len(tokens):.0f} | {sum(walls) / len(walls):.1f} |"
                if tokens else
                f"| {set_name} | {metric} | {mode} | {st['n']} ({fail}) | {st['auc']:.3f} "
                f"[{st['auc_ci'][0]:.2f}, {st['auc_ci'][1]:.2f}] | {st['ba']:.3f} | {st['best_ba']:.3f} | – | – |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="a running OpenAI-compatible endpoint (else --gguf starts one)")
    parser.add_argument("--gguf", help="GGUF model file to serve with llama_cpp.server")
    parser.add_argument("--server-python", default=sys.executable, help="python that has llama-cpp-python[server]")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--data", help="bench data folder (default: $RAGMON_BENCHDATA, else .cache/benchdata)")
    parser.add_argument("--rows", type=int, default=60, help="rows per set x metric")
    parser.add_argument("--modes", default="compact,parity")
    parser.add_argument("--sets", default="", help="comma-separated set names to run (default: every slice)")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--max-input-tokens", type=int, default=2_000)
    parser.add_argument("--max-completion-tokens", type=int, default=768)
    parser.add_argument("--time-budget-s", type=float, default=0, help="stop starting new rows after this (0 = none)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--report-only", action="store_true", help="no LLM calls: the table from --out")
    parser.add_argument("--no-write", action="store_true", help="print the table, leave docs/judges.md alone")
    parser.add_argument("--out", default=str(ROOT / ".cache" / "llm-bench" / "table.jsonl"))
    args = parser.parse_args(argv)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)

    cases = load_cases(Path(args.data) if args.data else None)
    chosen = [x for x in args.sets.split(",") if x]
    unknown = set(chosen) - {s for s, _ in SLICES}
    if unknown:
        parser.error(f"unknown set(s) {sorted(unknown)}; choose from {[s for s, _ in SLICES]}")
    slices = [(s, m) for s, m in SLICES if not chosen or s in chosen]
    rows = round_robin({f"{s}|{m}": select_slice(cases, s, m, args.rows) for s, m in slices})
    proc = None
    base_url = args.base_url
    if base_url is None and not args.report_only:
        if not args.gguf:
            parser.error("give --base-url, --gguf or --report-only")
        proc, base_url = start_server(args)
    try:
        results = asyncio.run(run(args, None if args.report_only else base_url, rows))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    modes = [m for m in args.modes.split(",") if m]
    lines = report(results, modes, args.bootstrap)
    sets_flag = f" --sets {args.sets}" if args.sets else ""
    body = "\n".join([
        f"`python bench/judge_llm_table.py --rows {args.rows}{sets_flag}` with {args.model} (llama-cpp-python, "
        f"{args.threads} threads); slices of up to {args.rows} label-balanced rows per set; the LLM rows are "
        "those every LLM mode answered, the local judge's all rows of the slice.", "", *lines, "",
        machine_line() + ".",
    ])
    print(body)
    if not args.no_write:
        write_section("llm-table", body, DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
