"""BM25 on BEIR SciFact (test, 300 queries) through ``ragmon eval --app``, against the published
Pyserini BM25 flat run (nDCG@10 0.6789, Recall@100 0.9253; bench/data/README.md).

The retriever is ``bench/retrievers/scifact_app.py`` (bm25s, k1 0.9, b 0.4, title + text,
Lucene's English stopwords, Porter stemming via PyStemmer; top 100). The same retrieval is also scored directly
with ``pytrec_eval`` (trec_eval), and ragmon's numbers are checked against trec_eval's on the
very lists that ragmon recorded.

    pip install -e '.[bench]'
    python bench/eval_scifact.py                    # print the table
    python bench/eval_scifact.py --write            # also update docs/benchmarks.md
    python bench/eval_scifact.py --reference-only   # without ragmon eval (trec_eval only)

Goal (issue 10): ragmon's nDCG@10 and Recall@100 within ±0.01 of 0.6789 / 0.9253. Exit 1 if not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrievers import datasets, harness
from bench.retrievers.app import ENV_APP_TIMES
from bench.retrievers.bm25 import Bm25Index
from bench.retrievers.paths import cache_dir

MARKER = "eval-scifact"
APP = "bench.retrievers.scifact_app:rag"
PUBLISHED = {"ndcg@10": 0.6789, "recall@100": 0.9253}
TOLERANCE = 0.01
TREC = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "mrr": "recip_rank"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="update the section in docs/benchmarks.md")
    parser.add_argument("--reference-only", action="store_true", help="skip ragmon eval")
    parser.add_argument("--eval-args", default="", help="extra arguments for ragmon eval (one string)")
    args = parser.parse_args(argv)

    cache = cache_dir()
    evalset = datasets.write_scifact_evalset()
    qrels = datasets.load_scifact_qrels()
    queries = datasets.load_scifact_queries()
    qrels = {q: r for q, r in qrels.items() if q in queries}

    # 1. The retriever alone, scored by trec_eval.
    started = time.perf_counter()
    corpus = datasets.load_scifact_corpus()
    load_s = time.perf_counter() - started
    index = Bm25Index(corpus)
    started = time.perf_counter()
    direct = {qid: [doc.id for doc, _ in index.search(queries[qid], 100)] for qid in qrels}
    search_s = time.perf_counter() - started
    reference = harness.trec_means(qrels, direct, {"ndcg_cut.10", "recall.100", "recip_rank"})
    ref = {name: reference[key] for name, key in TREC.items()}
    print(f"corpus {len(corpus)} docs loaded in {load_s:.2f}s, BM25 index {index.build_s:.2f}s; "
          f"{len(direct)} queries in {search_s:.2f}s ({1000 * search_s / len(direct):.2f} ms/query)")
    print("trec_eval on the direct run:", json.dumps({k: round(v, 4) for k, v in ref.items()}))

    # 2. Through ragmon eval, as a user runs it.
    ragmon: dict[str, float | None] = {}
    cis: dict[str, tuple[float, float] | None] = {}
    run: harness.EvalRun | None = None
    app_times: dict[str, float] = {}
    cross: dict[str, float] = {}
    same_lists = 0
    if not args.reference_only:
        if not harness.ragmon_eval_available():
            print("ragmon eval is not available (ragmon eval --help failed); use --reference-only", file=sys.stderr)
            return 2
        times_file = cache / "scifact_app_times.json"
        run = harness.run_ragmon_eval(
            evalset, APP, cache / "scifact_report.json",
            args=["--k", "1,3,5,10,100", "--judge", "none", *args.eval_args.split()],
            env=harness.bench_env(**{ENV_APP_TIMES: str(times_file)}))
        if times_file.exists():
            app_times = json.loads(times_file.read_text(encoding="utf-8"))
        for name in PUBLISHED | {"mrr": 0.0}:
            ragmon[name] = harness.report_mean(run.report, name)
            cis[name] = harness.report_ci(run.report, name)
        recorded = harness.report_run(run.report)
        same_lists = sum(recorded.get(q) == ids for q, ids in direct.items())
        on_recorded = harness.trec_means(qrels, recorded, {"ndcg_cut.10", "recall.100", "recip_rank"})
        cross = {name: on_recorded[key] for name, key in TREC.items()}
        print(f"ragmon eval: exit {run.returncode}, {run.wall_s:.2f}s wall, questions {run.report.get('questions')}")
        print("ragmon eval metrics:", json.dumps({k: v for k, v in ragmon.items()}))
        print("trec_eval on ragmon's recorded lists:", json.dumps(cross))
        print(f"recorded lists identical to the direct run: {same_lists}/{len(direct)}")

    measured = ragmon if run is not None else ref
    met = all(measured.get(name) is not None and abs(float(measured[name] or 0) - value) <= TOLERANCE
              for name, value in PUBLISHED.items())
    body = render(ref, ragmon, cis, cross, run, app_times, same_lists, len(direct), len(corpus),
                  load_s, index.build_s, search_s, met)
    print()
    print(body)
    if args.write:
        harness.write_section(MARKER, body)
        print(f"\nwrote {harness.DOCS_FILE}")
    return 0 if met else 1


def render(ref: dict[str, float], ragmon: dict[str, float | None], cis: dict[str, tuple[float, float] | None],
           cross: dict[str, float], run: harness.EvalRun | None, app_times: dict[str, float], same_lists: int,
           queries: int, docs: int, load_s: float, build_s: float, search_s: float, met: bool) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    source = "`ragmon eval`" if run is not None else "trec_eval on the direct run (ragmon eval not run)"
    lines = [
        "## Retrieval metrics on BEIR SciFact (BM25)",
        "",
        f"Measured {now} with `python bench/eval_scifact.py --write` on {harness.machine_line()}.",
        "",
        f"BM25 (`bm25s`, k1 0.9, b 0.4, Lucene variant, title + text, `\\w+` tokens, Lucene's 33 English "
        f"stopwords, Porter stemming via PyStemmer; `bench/retrievers/bm25.py`) over the {docs:,} SciFact "
        f"abstracts, top 100 for each of the {queries} test queries, evaluated by {source}.",
        "",
        "| metric | ragmon eval (95% CI) | trec_eval, same retrieval | published BM25 flat | ragmon − published |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name in ("ndcg@10", "recall@100", "mrr"):
        value = ragmon.get(name)
        ci = cis.get(name)
        shown = harness.fmt(value) + (f" ({ci[0]:.4f}–{ci[1]:.4f})" if ci else "")
        published = PUBLISHED.get(name)
        delta = "–" if value is None or published is None else f"{value - published:+.4f}"
        lines.append(f"| {name} | {shown} | {harness.fmt(ref[name])} | {harness.fmt(published)} | {delta} |")
    lines += ["", f"Goal (issue 10: nDCG@10 and Recall@100 within ±{TOLERANCE} of the published run): "
              f"**{'met' if met else 'not met'}**" + ("" if run is not None else " (trec_eval only)") + "."]
    if run is not None:
        diffs = [abs(float(ragmon[n] or 0) - cross[n]) for n in TREC if ragmon.get(n) is not None]
        lines += [
            "",
            f"ragmon's metrics against trec_eval (`pytrec_eval`) on the lists ragmon recorded: largest difference "
            f"{max(diffs, default=float('nan')):.1e}; recorded lists identical to calling the retriever directly: "
            f"{same_lists}/{queries}.",
        ]
    lines += [
        "",
        "Timing:",
        "",
        "| step | seconds |",
        "| --- | ---: |",
        f"| load the corpus ({docs:,} abstracts, gzip JSONL) | {load_s:.2f} |",
        f"| build the BM25 index (tokenize, stem, index) | {build_s:.2f} |",
        f"| {queries} queries, direct (top 100; {1000 * search_s / queries:.2f} ms/query) | {search_s:.2f} |",
    ]
    if run is not None:
        app_s = app_times.get("app_s")
        lines.append(f"| `ragmon eval` end to end (new process: imports, index build, {queries} questions, "
                     f"metrics, report) | {run.wall_s:.2f} |")
        if app_s is not None:
            lines.append(f"| the app's own work (search + answer), summed over its {int(app_times.get('calls', 0))} "
                         f"calls, 4 at a time (waits for the GIL included) | {app_s:.2f} |")
        lines += ["", f"Command run: `{harness.display_argv(run.argv)}`."]
    lines += [
        "",
        "Published numbers: Pyserini/Anserini BM25 flat on BEIR SciFact test (nDCG@10 0.6789, Recall@100 0.9253; "
        "multifield 0.6647 / 0.9076; BEIR paper 0.665), as listed in `bench/data/README.md`. "
        "What is left of the gap is the analyzer (Lucene's StandardTokenizer versus a `\\w+` regular expression) "
        "and Lucene's lossy document-length norms. The analyzer matters most: with bm25s's default `\\w\\w+` "
        "tokens, which drop one-character tokens, Recall@100 falls to 0.9187 (Porter) or 0.9127 (Snowball "
        "English), outside the ±0.01 band; Snowball English with `\\w+` gives 0.6804 / 0.9220.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
