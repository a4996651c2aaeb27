"""The chunking grid on BEIR SciFact: ``ragmon chunking`` as a user runs it, timed, into the docs.

    python bench/chunking_grid.py            # BM25, sizes 64,128,256,512 x overlaps 0,0.25 + paragraph rows

Corpus: ``../shared/benchdata/retrieval/scifact/corpus.jsonl.gz`` (5,183 abstracts, read as-is:
``_id``, ``title``, ``text``); golden set: the 300 test queries with their qrels
(``bench/retrievers/datasets.py``). Writes ``docs/chunking-scifact.json`` and
``docs/chunking-scifact.svg`` and the ``chunking-grid`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrievers.datasets import write_scifact_evalset  # noqa: E402
from bench.retrievers.harness import bench_env, machine_line, ragmon_command, write_section  # noqa: E402
from bench.retrievers.paths import cache_dir, scifact_dir  # noqa: E402

DOCS = ROOT / "docs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="64,128,256,512")
    parser.add_argument("--overlaps", default="0,0.25")
    parser.add_argument("--retriever", default="bm25", choices=("bm25", "dense"))
    parser.add_argument("--no-docs", action="store_true", help="print only; do not touch docs/")
    args = parser.parse_args(argv)
    evalset = write_scifact_evalset(cache_dir() / "scifact_test.jsonl")
    suffix = "" if args.retriever == "bm25" else "-dense"
    out = (cache_dir() if args.no_docs else DOCS) / f"chunking-scifact{suffix}.json"
    argv_run = [*ragmon_command(), "chunking", str(scifact_dir() / "corpus.jsonl.gz"), str(evalset),
                "--sizes", args.sizes, "--overlaps", args.overlaps, "--retriever", args.retriever,
                "--k", "1,5,10,100", "--primary-k", "10", "--out", str(out), "--no-progress"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv_run, cwd=ROOT, env=bench_env(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(proc.stdout, end="")
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    grid = json.loads(out.read_text(encoding="utf-8"))
    # the JSON is committed next to the docs: keep it free of this machine's paths
    grid["corpus"], grid["evalset"] = "scifact/corpus.jsonl.gz", "scifact_test.jsonl (300 test queries)"
    out.write_text(json.dumps(grid, indent=2) + "\n", encoding="utf-8")
    print(f"wall {wall:.1f} s, CPU {cpu:.1f} s; {machine_line()}")
    if args.no_docs or args.retriever != "bm25":
        return 0
    rows = ["| | mode | size | overlap | chunks | avg tokens | Recall@10 | nDCG@10 | Recall@100 | MRR | index s |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, c in enumerate(grid["configs"]):
        overlap = f"{c['overlap']:g} ({c['overlap_tokens']})" if c["mode"] == "fixed" else "–"
        rows.append(f"| {'**best**' if i == grid['best'] else ''} | {c['mode']} | {c['size']} | {overlap} | "
                    f"{c['chunks']} | {c['avg_chunk_tokens']} | {c['recall@10']:.4f} | {c['ndcg@10']:.4f} | "
                    f"{c['recall@100']:.4f} | {c['mrr']:.4f} | {c['index_s']:.2f} |")
    body = "\n".join([
        "## Chunking grid (SciFact, BM25)",
        "",
        f"`python bench/chunking_grid.py` runs `ragmon chunking` over BEIR SciFact ({grid['documents']:,} abstracts, "
        f"{grid['questions']} test queries; a chunk is relevant when it belongs to a gold abstract, each gold "
        "abstract counted once, k counts chunks), BM25 (bm25s, k1 0.9, b 0.4, Porter), title prefixed to every "
        "chunk. Sizes are MiniLM word pieces; the paragraph rows pack whole sentences (the abstracts have one "
        "paragraph each).",
        "",
        *rows,
        "",
        f"Whole run ({len(grid['configs'])} configurations, tokenizing, chunking, indexing and 300 searches each): "
        f"**{wall:.0f} s wall, {cpu:.0f} s CPU** — goal under 3 minutes on 2 cores: "
        f"**{'met' if wall < 180 else 'not met'}**. {machine_line()}.",
        "",
        "For reference, BM25 over whole abstracts (bench/eval_scifact.py) reaches nDCG@10 0.6769 and R@100 0.9287. "
        "The 512-token rows are close to that run by construction: most SciFact abstracts fit in one 512-piece "
        "chunk (5,536 chunks for 5,183 abstracts), so chunk == document. Smaller chunks lose recall because a "
        "query's terms are spread over the abstract, and overlap buys little with BM25 (a few thousandths of "
        "nDCG, for up to 24 % more chunks). Sentence-aligned packing (paragraph rows) beats fixed windows of "
        "the same size at 64–256 tokens. Plot: "
        "[chunking-scifact.svg](chunking-scifact.svg) (the best row circled); data: "
        "[chunking-scifact.json](chunking-scifact.json).",
    ])
    write_section("chunking-grid", body)
    print("docs/benchmarks.md: chunking-grid section written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
