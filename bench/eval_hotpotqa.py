"""Multi-hop retrieval on HotpotQA (dev, distractor setting, 103 questions) through
``ragmon eval --app``, with BM25 and with the MiniLM dense retriever.

All context paragraphs of the 103 questions are pooled into one corpus (1,021 paragraphs, id =
title); each question's two supporting paragraphs are its gold documents, one per hop (hop order:
``bench/retrievers/datasets.py``). Reported: ``two_hop_recall@k`` (both hops in the top k) and
the misses (hop1_miss: only hop 1 absent; hop2_miss: only hop 2 absent; both_miss), MRR and
recall@k, from ``ragmon eval`` and, on the same lists, from our own two-hop count and trec_eval
(``pytrec_eval``).

    pip install -e '.[bench]'
    python bench/eval_hotpotqa.py                   # print the tables
    python bench/eval_hotpotqa.py --write           # also update docs/benchmarks.md
    python bench/eval_hotpotqa.py --reference-only  # without ragmon eval
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrievers import datasets, harness
from bench.retrievers.app import ENV_APP_TIMES
from bench.retrievers.bm25 import Bm25Index
from bench.retrievers.dense import DenseIndex
from bench.retrievers.paths import cache_dir

MARKER = "eval-hotpotqa"
KS = (2, 5, 10)
TOP = 10
TREC_MEASURES = {"recip_rank", *(f"recall.{k}" for k in KS)}


@dataclass
class Result:
    name: str
    app: str
    build_s: float
    search_s: float
    direct: dict[str, list[str]]
    reference: dict[str, float]
    two_hop: dict[int, harness.TwoHop]
    note: str = ""
    run: harness.EvalRun | None = None
    ragmon: dict[str, float | None] = field(default_factory=dict)
    cis: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    misses: dict[str, Any] = field(default_factory=dict)
    cross: dict[str, float] = field(default_factory=dict)
    same_lists: int = 0
    app_times: dict[str, float] = field(default_factory=dict)


def metric_names() -> list[str]:
    return [*(f"two_hop_recall@{k}" for k in KS), "mrr", *(f"recall@{k}" for k in KS)]


def reference_metrics(qrels: dict[str, dict[str, int]], hops: dict[str, Sequence[Sequence[str]]],
                      run: dict[str, list[str]]) -> tuple[dict[str, float], dict[int, harness.TwoHop]]:
    trec = harness.trec_means(qrels, run, TREC_MEASURES)
    two = {k: harness.two_hop(hops, run, k) for k in KS}
    values = {f"two_hop_recall@{k}": two[k].recall for k in KS}
    values["mrr"] = trec["recip_rank"]
    values.update({f"recall@{k}": trec[f"recall_{k}"] for k in KS})
    return values, two


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="update the section in docs/benchmarks.md")
    parser.add_argument("--reference-only", action="store_true", help="skip ragmon eval")
    parser.add_argument("--reuse-vectors", action="store_true",
                        help="read cached paragraph vectors instead of timing a fresh embedding")
    parser.add_argument("--eval-args", default="", help="extra arguments for ragmon eval (one string)")
    args = parser.parse_args(argv)

    cache = cache_dir()
    evalset = datasets.write_hotpotqa_evalset()
    items = datasets.load_hotpotqa()
    rows = datasets.hotpotqa_rows(items)
    corpus = datasets.hotpotqa_corpus(items)
    qrels = {r["id"]: dict.fromkeys(r["ground_truth_docs"], 1) for r in rows}
    hops = {r["id"]: r["hops"] for r in rows}
    rules = datasets.hop_rule_counts(items)
    print(f"{len(rows)} questions, {len(corpus)} pooled paragraphs; hop rules {rules}")

    builders: list[tuple[str, str, Callable[[], Any]]] = [
        ("BM25", "bench.retrievers.hotpotqa_bm25_app:rag", lambda: Bm25Index(corpus)),
        ("MiniLM dense", "bench.retrievers.hotpotqa_dense_app:rag",
         lambda: DenseIndex(corpus, cache_dir=cache, refresh=not args.reuse_vectors)),
    ]
    results: list[Result] = []
    for name, app, build in builders:
        index = build()
        started = time.perf_counter()
        direct = {r["id"]: [doc.id for doc, _ in index.search(r["question"], TOP)] for r in rows}
        search_s = time.perf_counter() - started
        reference, two = reference_metrics(qrels, hops, direct)
        note = " (vectors from cache)" if getattr(index, "from_cache", False) else ""
        results.append(Result(name, app, index.build_s, search_s, direct, reference, two, note))
        print(f"{name}: index {index.build_s:.2f}s{note}, {len(rows)} queries {search_s:.2f}s;",
              json.dumps({k: round(v, 4) for k, v in reference.items()}))

    if not args.reference_only:
        if not harness.ragmon_eval_available():
            print("ragmon eval is not available (ragmon eval --help failed); use --reference-only", file=sys.stderr)
            return 2
        for res in results:
            slug = res.app.rsplit(".", 1)[-1].split(":")[0]
            times_file = cache / f"{slug}_times.json"
            res.run = harness.run_ragmon_eval(
                evalset, res.app, cache / f"{slug}_report.json",
                args=["--k", ",".join(map(str, KS)), "--judge", "none", *args.eval_args.split()],
                env=harness.bench_env(**{ENV_APP_TIMES: str(times_file)}))
            if times_file.exists():
                res.app_times = json.loads(times_file.read_text(encoding="utf-8"))
            for metric in metric_names():
                res.ragmon[metric] = harness.report_mean(res.run.report, metric)
                res.cis[metric] = harness.report_ci(res.run.report, metric)
            res.misses = dict(res.run.report.get("multi_hop_misses") or {})
            recorded = harness.report_run(res.run.report)
            res.cross, _ = reference_metrics(qrels, hops, recorded)
            res.same_lists = sum(recorded.get(q) == ids for q, ids in res.direct.items())
            print(f"{res.name} via ragmon eval: exit {res.run.returncode}, {res.run.wall_s:.2f}s;",
                  json.dumps(res.ragmon), "misses", json.dumps(res.misses),
                  f"identical lists {res.same_lists}/{len(rows)}")

    body = render(results, hops, len(corpus), rules)
    print()
    print(body)
    if args.write:
        harness.write_section(MARKER, body)
        print(f"\nwrote {harness.DOCS_FILE}")
    return 0


def render(results: list[Result], hops: dict[str, Sequence[Sequence[str]]], docs: int, rules: dict[str, int]) -> str:
    questions = len(hops)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    through = all(r.run is not None for r in results)
    bridge = questions - rules.get("comparison", 0)
    lines = [
        "## Multi-hop retrieval on HotpotQA (BM25 and MiniLM dense)",
        "",
        f"Measured {now} with `python bench/eval_hotpotqa.py --write` on {harness.machine_line()}.",
        "",
        f"Data: the {questions} HotpotQA dev questions of the bench data's `retrieval/hotpotqa_dev_103.json` "
        f"(distractor setting, all `hard`; {bridge} bridge, {rules.get('comparison', 0)} comparison). All "
        f"{docs:,} context paragraphs are pooled into one corpus (document id = title), so every question searches "
        f"the other questions' paragraphs too. Gold documents: the two supporting paragraphs, one per hop. Hop "
        f"order (`bench/retrievers/datasets.py`): for comparison questions the `supporting_facts` order; for "
        f"bridge questions hop 1 is the paragraph the question names (title in the question: "
        f"{rules.get('named', 0)}), else the one whose text names the other (the link to the bridge entity: "
        f"{rules.get('linked', 0)}), else `supporting_facts` order ({rules.get('sf_order', 0)}); this differs "
        f"from plain `supporting_facts` order on {rules.get('differs_from_sf_order', 0)} questions.",
        "",
        "Retrievers (`bench/retrievers/`), top 10: BM25 as in the SciFact section (bm25s, k1 0.9, b 0.4, title + "
        "text); MiniLM: all-MiniLM-L6-v2 int8 (ragmon's offline embedder, the local judge's model) on "
        "\"title. text\" (first 128 word pieces), exact cosine search.",
        "",
        "Values from " + ("`ragmon eval` (95% bootstrap CI)" if through else
                          "our own two-hop count and trec_eval on the direct run (ragmon eval not run)") + ":",
        "",
        "| metric | " + " | ".join(r.name for r in results) + " |",
        "| --- |" + " ---: |" * len(results),
    ]
    for metric in metric_names():
        cells = []
        for r in results:
            value = r.ragmon.get(metric) if through else r.reference[metric]
            ci = r.cis.get(metric) if through else None
            cells.append(harness.fmt(value, 3) + (f" ({ci[0]:.3f}–{ci[1]:.3f})" if ci else ""))
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Misses (questions, of " + str(questions) + "; hop1_miss = hop 2 found but not hop 1, hop2_miss = hop 1 "
        "found but not hop 2), by our own count on the lists " + ("ragmon recorded" if through else "retrieved") + ":",
        "",
        "| k | " + " | ".join(f"{r.name} found / hop1_miss / hop2_miss / both_miss" for r in results) + " |",
        "| ---: |" + " ---: |" * len(results),
    ]
    for k in KS:
        cells = []
        for r in results:
            t = harness.two_hop(hops, harness.report_run(r.run.report), k) if r.run else r.two_hop[k]
            cells.append(f"{round(t.recall * t.questions)} / {t.hop1_miss} / {t.hop2_miss} / {t.both_miss}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    if through:
        lines += ["", "`ragmon eval`'s own `multi_hop_misses` (at its `--primary-k`, default 5): " + "; ".join(
            f"{r.name} {json.dumps(r.misses)}" for r in results) + "."]
        worst = max(abs(float(r.ragmon[m] or 0) - r.cross[m]) for r in results for m in metric_names()
                    if r.ragmon.get(m) is not None)
        lines += ["", f"ragmon's metrics against our two-hop count and trec_eval on the lists ragmon recorded: "
                  f"largest difference {worst:.1e}; recorded lists identical to calling the retriever directly: "
                  + ", ".join(f"{r.name} {r.same_lists}/{questions}" for r in results) + "."]
    lines += ["", "Timing:", "", "| step | " + " | ".join(r.name for r in results) + " |",
              "| --- |" + " ---: |" * len(results),
              f"| build the index ({docs:,} paragraphs), s | "
              + " | ".join(f"{r.build_s:.2f}{r.note}" for r in results) + " |",
              f"| {questions} queries, direct, ms/query | "
              + " | ".join(f"{1000 * r.search_s / questions:.2f}" for r in results) + " |"]
    if through:
        lines.append("| `ragmon eval` end to end (new process: imports, index, questions, report), s | "
                     + " | ".join(f"{r.run.wall_s:.2f}" if r.run else "–" for r in results) + " |")
        lines.append("| the app's own work (search + answer), summed over its calls, 4 at a time "
                     "(GIL waits included), s | "
                     + " | ".join(f"{r.app_times['app_s']:.2f}" if r.app_times else "–" for r in results) + " |")
        lines += ["", "Commands run: " + "; ".join(f"`{harness.display_argv(r.run.argv)}`"
                                                   for r in results if r.run) + ". "
                  "The dense app reads the paragraph vectors that the direct run cached in `.cache/bench/`."]
    lines += ["", "No published number applies to this pooled 103-question corpus; the point is the "
              "two-hop shape: hop 2 (the bridge paragraph, which shares few words with the question) is "
              "what both retrievers miss."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
