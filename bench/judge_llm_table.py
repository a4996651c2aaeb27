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
The markdown goes to docs/benchmarks.md between ``<!-- llm-table:start -->`` and ``<!-- llm-table:end -->``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import statistics
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
from ragmon.scoring import claim_verdicts as cv  # noqa: E402
from ragmon.scoring.local import LocalJudge  # noqa: E402
from ragmon.scoring.metrics import formulas  # noqa: E402
from ragmon.types import Document, RagTrace  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
# (set, metric) slices, in the order rows are taken round-robin
SLICES = (
    ("ragtruth_qa", "faithfulness"),
    ("ragtruth_summary", "faithfulness"),
    ("ragtruth_data2txt", "faithfulness"),
    ("wice", "faithfulness"),
    ("ragtruth_qa_relevancy", "answer_relevancy"),
    ("wikiqa_single", "context_relevance"),
)


PAIR_KINDS = ("number", "negation", "name")  # the one-edit kinds the goals name
PAIR_SET = "one_edit_"  # + kind: the pairs' sides, kept out of the cross-dataset table


def pair_cases(per_kind: int, data: Path | None = None) -> list[Case]:
    """``per_kind`` held-out one-edit pairs of each kind (``bench/one_edit_pairs.py``), in sha256
    order of their id, the kinds taken in turn (a time-limited run covers each), as two cases each:
    the original (label 1) and its edited copy (label 0), side by side; ``group`` is the pair's id."""
    from one_edit_pairs import load_pairs

    pairs = load_pairs() if data is None else load_pairs(benchdata=data)
    pairs.sort(key=lambda p: hashlib.sha256(p["id"].encode()).hexdigest())
    by_kind = [[p for p in pairs if p["kind"] == kind][:per_kind] for kind in PAIR_KINDS]
    out: list[Case] = []
    for i in range(per_kind):
        for p in [ps[i] for ps in by_kind if i < len(ps)]:
            kind = p["kind"]
            for label, answer in ((1, p["answer"]), (0, p["edited"])):
                out.append(Case(set=PAIR_SET + kind, metric="faithfulness", group=p["id"], question=p["question"],
                                contexts=list(p["contexts"]), answer=answer, label=label))
    return out


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


class DroppedItems(logging.Handler):
    """The contradiction items the evidence check drops, as it logs them (one row is judged at a time)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.items: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "drop_reason"):
            self.items.append({"reason": record.drop_reason, "claim_index": record.claim_index,
                               "claim": record.claim[:300], "evidence": record.evidence[:300]})


def unchecked_faithfulness(rec: dict[str, Any]) -> float | None:
    """What faithfulness would have been had the dropped contradiction items counted (before the check)."""
    claims = rec.get("claims") or []
    if rec["metric"] != "faithfulness" or rec.get("score") is None or not claims:
        return rec.get("score")
    kept = {i for i, v in enumerate(rec.get("claim_verdicts") or []) if v["verdict"] == cv.CONTRADICTED}
    dropped = {d["claim_index"] for d in rec.get("dropped") or [] if d["reason"] != sc.INVALID_CONTRADICTION_NO_CLAIM}
    contradicted = kept | dropped
    supported = [bool(c["supported"]) and i not in contradicted for i, c in enumerate(claims)]
    value = formulas.faithfulness_with_contradictions(supported, len(contradicted))
    return 1.0 if value is None else value


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
                    "group": c.group, "mode": "local", "score": local_score(local, c)})
    if base_url is None:
        return done
    judges = build_judges(args, base_url, modes)
    dropped = DroppedItems()
    evidence_log = logging.getLogger("ragmon.scoring.llm.evidence")
    evidence_log.addHandler(dropped)
    evidence_log.setLevel(logging.DEBUG)
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
                                       "kind": c.kind, "group": c.group, "mode": mode,
                                       "prompt": prompt_version(mode)}
                started = time.perf_counter()
                dropped.items.clear()
                try:
                    scores = await judges[mode].score(to_trace(c))
                    values = {name: scores.get(name) for name in (sc.METRIC_FAITHFULNESS,
                                                                  sc.METRIC_ANSWER_RELEVANCY)}
                    rec.update(score=metric_score(c, values, scores.details.get("context_relevant")),
                               calls=scores.details.get("calls", 0), prompt_tokens=scores.prompt_tokens,
                               completion_tokens=scores.completion_tokens,
                               claims=scores.details.get("claims", []),
                               claim_verdicts=scores.details.get(cv.DETAIL_KEY, []),
                               dropped=list(dropped.items),
                               invalid_contradictions=scores.details.get("invalid_contradiction_reasons", {}),
                               error=None)
                    rec["score_unchecked"] = unchecked_faithfulness(rec)
                except JudgeError as exc:
                    rec.update(score=None, calls=0, prompt_tokens=0, completion_tokens=0, error=exc.reason,
                               message=str(exc)[:200])
                rec["wall_s"] = round(time.perf_counter() - started, 2)
                rec["at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                record(rec)
                print(json.dumps({k: v for k, v in rec.items() if k != "claims"}), file=sys.stderr)
    finally:
        evidence_log.removeHandler(dropped)
        for judge in judges.values():
            await judge.aclose()
    return done


def _line(set_name: str, metric: str, label: str, rows: list[dict[str, Any]], boot: int, llm: bool) -> str | None:
    ok = [r for r in rows if r.get("score") is not None]
    failed = Counter(r.get("error") or "no score" for r in rows if r.get("score") is None)
    if len({r["label"] for r in ok}) < 2:
        return None
    st = row_stats([r["label"] for r in ok], [r["score"] for r in ok], boot)
    fail = ", ".join(f"{k} {v}" for k, v in failed.items()) or "0"
    cost = "– | –"
    if llm:
        tokens = [r["prompt_tokens"] + r["completion_tokens"] for r in rows]
        walls = [r["wall_s"] for r in rows]
        cost = f"{sum(tokens) / len(tokens):.0f} | {sum(walls) / len(walls):.1f}"
    return (f"| {set_name} | {metric} | {label} | {st['n']} ({fail}) | {st['auc']:.3f} "
            f"[{st['auc_ci'][0]:.2f}, {st['auc_ci'][1]:.2f}] | {st['ba']:.3f} | {st['best_ba']:.3f} | {cost} |")


def report(results: list[dict[str, Any]], modes: Sequence[str], boot: int) -> list[str]:
    """Per slice: the local judge on all its rows; each LLM mode on the rows it answered, beside the
    local judge on the same rows; with several modes, each on the rows every mode answered (paired)."""
    lines = [
        "| set | metric | judge (rows) | n scored (failed) | AUC [95 % CI] | bal. acc. @0.5 | best bal. acc. "
        "| tokens / row | wall s / row |",
        "|---|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for set_name, metric in SLICES:
        of_slice = [r for r in results if r["set"] == set_name and r["metric"] == metric]
        answered = [{r["key"] for r in of_slice if r["mode"] == m} for m in modes]
        common = set.intersection(*answered) if answered else set()
        local = [r for r in of_slice if r["mode"] == "local"]
        candidates = [("local (slice)", local, False)]
        for mode in modes:
            own = [r for r in of_slice if r["mode"] == mode]
            keys = {r["key"] for r in own}
            candidates += [(f"local ({mode}'s rows)", [r for r in local if r["key"] in keys], False),
                           (mode, own, True)]
        if len(modes) > 1 and common:
            candidates.append(("local (paired)", [r for r in local if r["key"] in common], False))
            candidates += [(f"{m} (paired)", [r for r in of_slice if r["mode"] == m and r["key"] in common], True)
                           for m in modes]
        for label, rows, llm in candidates:
            line = _line(set_name, metric, label, rows, boot, llm)
            if line is not None:
                lines.append(line)
    return lines


def evidence_report(results: list[dict[str, Any]], modes: Sequence[str], boot: int) -> list[str]:
    """The contradiction items real replies listed, what the evidence check kept and dropped, and
    faithfulness with the check against what it would have been without it (same rows)."""
    lines = ["| judge | faithfulness rows | items listed | kept | dropped: not in sources / quotes the answer / "
             "no claim | rows the check changed | AUC with the check | AUC had dropped items counted |",
             "|---|---:|---:|---:|---|---:|---|---|"]
    for mode in modes:
        rows = [r for r in results if r["mode"] == mode and r["metric"] == "faithfulness"
                and not r["set"].startswith(PAIR_SET) and r.get("score") is not None and "score_unchecked" in r]
        if not rows:
            continue
        kept = sum(sum(v["verdict"] == cv.CONTRADICTED for v in r.get("claim_verdicts") or []) for r in rows)
        reasons = Counter(d["reason"] for r in rows for d in r.get("dropped") or [])
        changed = sum(r["score"] != r["score_unchecked"] for r in rows)
        cells = []
        for key in ("score", "score_unchecked"):
            if len({r["label"] for r in rows}) < 2:
                cells.append("–")
                continue
            st = row_stats([r["label"] for r in rows], [r[key] for r in rows], boot)
            cells.append(f"{st['auc']:.3f} [{st['auc_ci'][0]:.2f}, {st['auc_ci'][1]:.2f}]")
        lines.append(
            f"| {mode} | {len(rows)} | {kept + sum(reasons.values())} | {kept} | "
            f"{reasons.get(sc.INVALID_CONTRADICTION_NOT_IN_SOURCES, 0)} / "
            f"{reasons.get(sc.INVALID_CONTRADICTION_QUOTES_ANSWER, 0)} / "
            f"{reasons.get(sc.INVALID_CONTRADICTION_NO_CLAIM, 0)} "
            f"| {changed} | {cells[0]} | {cells[1]} |")
    return lines


def pair_report(results: list[dict[str, Any]], modes: Sequence[str]) -> list[str]:
    """One-edit pairs: per kind and judge, the share of copies scored lower than their original, the
    median drop, and (LLM modes) the share whose copy has a contradicted claim its original has not."""
    lines = ["| edit | judge | pairs (failed) | copy scored lower | median drop | a new contradicted claim |",
             "|---|---|---:|---:|---:|---:|"]

    def contradicted(r: dict[str, Any]) -> int:
        return sum(v["verdict"] == cv.CONTRADICTED for v in r.get("claim_verdicts") or [])

    for kind in PAIR_KINDS:
        for mode in ("local", *modes):
            sides: dict[str, dict[int, dict[str, Any]]] = {}
            for r in results:
                if r["set"] == PAIR_SET + kind and r["mode"] == mode:
                    sides.setdefault(r["group"], {})[r["label"]] = r
            both = [s for s in sides.values() if len(s) == 2]
            scored = [s for s in both if s[0].get("score") is not None and s[1].get("score") is not None]
            if not scored:
                continue
            drops = [s[1]["score"] - s[0]["score"] for s in scored]
            new = "–" if mode == "local" else \
                f"{sum(contradicted(s[0]) > contradicted(s[1]) for s in scored) / len(scored):.0%}"
            lines.append(f"| {kind} | {mode} | {len(scored)} ({len(both) - len(scored)}) | "
                         f"{sum(d > 1e-9 for d in drops) / len(drops):.0%} | {statistics.median(drops):.3f} | {new} |")
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
    parser.add_argument("--pairs", type=int, default=0, help="one-edit pairs per kind (number, negation, name)")
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
    rows += pair_cases(args.pairs, Path(args.data) if args.data else None) if args.pairs else []
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
    evidence = evidence_report(results, modes, args.bootstrap)
    pairs = pair_report(results, modes)
    sets_flag = f" --sets {args.sets}" if args.sets else ""
    stamps = sorted(r["at"] for r in results if r.get("at"))
    when = f"Measured {stamps[0]} – {stamps[-1]} (UTC) on " if stamps else "On "
    body = "\n".join([
        f"`python bench/judge_llm_table.py --rows {args.rows}{sets_flag}` with {args.model} (llama-cpp-python, "
        f"{args.threads} threads); slices of up to {args.rows} label-balanced rows per set; each LLM mode on "
        "the rows it answered (failed rows count in the tokens and wall time columns; a failed reply's tokens are not "
        "reported back, so they count 0), beside the local judge on the same rows.", "", *lines, "",
        "Contradiction items in the real replies (faithfulness rows) and the evidence check "
        "(`ragmon/scoring/llm/evidence.py`):", "", *evidence, "",
        *(["One-edit pairs (held-out, `--pairs`): the local judge on every pair chosen, an LLM mode on the pairs "
           "it finished (a pair with a failed side counts as failed):", "", *pairs, ""]
          if len(pairs) > 2 else []),
        when + machine_line() + ".",
    ])
    print(body)
    if not args.no_write:
        write_section("llm-table", body, DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
