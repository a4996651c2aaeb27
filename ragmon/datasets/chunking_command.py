"""``ragmon chunking CORPUS EVALSET --sizes 128,256,512 --overlaps 0,0.5 --retriever bm25|dense --out grid.json``.

Exit codes: 0 done, 2 bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Final

from ..errors import EvalInputError, ModelError
from ..evaluation.command import positive_ints
from ..evaluation.goldenset import load_golden_set
from ..evaluation.terminal import Progress
from .chunking import MODES, ChunkingConfig, tokenize_corpus
from .corpus import load_corpus
from .grid import RETRIEVERS, GridOptions, GridResult, run_grid
from .plot import grid_svg

NAME: Final = "chunking"
HELP: Final = "grid-search chunk size/overlap/mode against a golden set (Recall@k, NDCG@k)"
DESCRIPTION: Final = (
    "Re-chunk the corpus, re-index it (BM25 or MiniLM) and evaluate every configuration against the golden "
    "set; print the table with the best row marked, write JSON and an SVG plot."
)

EXIT_OK = 0
EXIT_USAGE = 2


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(dict.fromkeys(float(p) for p in text.split(",") if p.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected numbers >= 0, got {text!r}")
    return values


def _modes(text: str) -> tuple[str, ...]:
    values = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [v for v in values if v not in MODES[1:]]
    if bad:
        raise argparse.ArgumentTypeError(f"content-aware modes are {', '.join(MODES[1:])}; got {', '.join(bad)}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", help="directory of .txt/.md files, or JSONL {id, title, text} (.jsonl.gz too)")
    parser.add_argument("evalset", help="golden set JSONL; ground_truth_docs are corpus document ids or chunk ids "
                        "(doc#start-end)")
    parser.add_argument("--sizes", type=positive_ints, default=(128, 256, 512), metavar="128,256,512",
                        help="chunk sizes in tokens of the embedding model's tokenizer (default 128,256,512)")
    parser.add_argument("--overlaps", type=_floats, default=(0.0, 0.5), metavar="0,0.5",
                        help="overlaps: below 1 a fraction of the size, else tokens (default 0,0.5)")
    parser.add_argument("--modes", type=_modes, default=("paragraph",), metavar="paragraph,section",
                        help="content-aware modes added as extra rows, one per size and overlap (overlap = "
                        "trailing whole sentences up to that many tokens; default paragraph; '' for none)")
    parser.add_argument("--title-prefix", choices=("on", "off", "both"), default="on",
                        help="prefix each chunk with its document's title (default on; both = rows for each)")
    parser.add_argument("--count-title", choices=("on", "off", "both"), default="off",
                        help="count the prefixed title's tokens towards the size (default off: the size bounds "
                        "the span and ids do not depend on titles; both = rows for each)")
    parser.add_argument("--retriever", choices=RETRIEVERS, default="bm25", help="index each configuration with "
                        "BM25 (bm25s) or MiniLM dense search (default bm25)")
    parser.add_argument("--k", type=positive_ints, default=(1, 3, 5, 10), metavar="1,3,5,10",
                        help="cut-offs, in chunks (default 1,3,5,10)")
    parser.add_argument("--primary-k", type=int, default=None, help="cut-off that picks the best row (default 5, "
                        "or the --k value closest to it)")
    parser.add_argument("--out", type=Path, default=None, metavar="grid.json", help="write the results as JSON")
    parser.add_argument("--plot", type=Path, default=None, metavar="grid.svg",
                        help="write an SVG plot (default: next to --out, same name with .svg)")
    parser.add_argument("--threads", type=int, default=2, help="embedding threads for --retriever dense")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def configs_from_args(args: argparse.Namespace) -> list[ChunkingConfig]:
    """Per title setting: the fixed grid (sizes x overlaps), then each content-aware mode over the
    same grid. Counting the title only applies where a title is prefixed."""
    choices = {"on": (True,), "off": (False,), "both": (True, False)}
    counts = {"on": (True,), "off": (False,), "both": (False, True)}
    titles = list(dict.fromkeys((prefix, prefix and count) for prefix in choices[args.title_prefix]
                                for count in counts[getattr(args, "count_title", "off")]))
    configs: list[ChunkingConfig] = []
    for prefix, count in titles:
        for mode in ("fixed", *args.modes):
            for size in args.sizes:
                for overlap in args.overlaps:
                    config = ChunkingConfig.from_fraction(size, overlap, mode=mode, title_prefix=prefix,
                                                          count_title=count)
                    if config not in configs:
                        configs.append(config)
    return configs


def _title_cell(row: dict[str, Any]) -> str:
    if not row["title_prefix"]:
        return "no"
    return "counted" if row.get("count_title") else "yes"


def render_table(result: GridResult, k: int) -> str:
    best = result.best
    header = ["", "mode", "size", "overlap", "shared", "title", "chunks", f"recall@{k}", f"ndcg@{k}", "mrr",
              "index s"]
    lines = []
    for i, row in enumerate(result.configs):
        lines.append(["*" if i == best else "", row["mode"], str(row["size"]),
                      f"{row['overlap']:g} ({row['overlap_tokens']})", f"{row.get('avg_shared_tokens', 0.0):g}",
                      _title_cell(row), str(row["chunks"]),
                      _num(row.get(f"recall@{k}")), _num(row.get(f"ndcg@{k}")), _num(row.get("mrr")),
                      f"{row['index_s']:.2f}"])
    widths = [max(len(h), *(len(line[c]) for line in lines)) for c, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) if c < 2 else h.rjust(w) for c, (h, w) in enumerate(zip(header, widths, strict=True)))]
    for line in lines:
        out.append("  ".join(v.ljust(w) if c < 2 else v.rjust(w)
                             for c, (v, w) in enumerate(zip(line, widths, strict=True))))
    if best is not None:
        out.append(f"* best by ndcg@{k} (then recall@{k}): {_describe(result.configs[best])}")
    out.append("overlap: configured (tokens; content-aware modes carry whole sentences up to it); "
               "shared: mean tokens a chunk shares with the previous one")
    return "\n".join(out) + "\n"


def _describe(row: dict[str, Any]) -> str:
    title = {"no": "off", "yes": "on", "counted": "on, counted in the size"}[_title_cell(row)]
    return f"{row['mode']} size {row['size']}, overlap {row['overlap']:g}, title prefix {title}"


def _num(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else "–"


def _primary_k(ks: tuple[int, ...], primary: int | None) -> int:
    if primary is not None:
        if primary < 1:
            raise EvalInputError("--primary-k must be >= 1")
        return primary
    return min(ks, key=lambda k: (abs(k - 5), k))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    try:
        k = _primary_k(args.k, args.primary_k)
        ks = tuple(sorted({*args.k, k}))
        configs = configs_from_args(args)
        docs = load_corpus(args.corpus)
        golden = load_golden_set(args.evalset)
        for problem in golden.problems:
            print(f"ragmon chunking: {args.evalset} line {problem.line}: {problem.message}", file=sys.stderr)
        doc_tokens = tokenize_corpus(docs)
        bar: Progress | None = None

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if args.no_progress:
                return
            if bar is None:
                bar = Progress(total, label="chunking")
            bar.advance()

        try:
            result = run_grid(doc_tokens, golden.rows, configs,
                              GridOptions(args.retriever, ks, k, threads=args.threads), progress)
        finally:
            if bar is not None:
                bar.close()
    except (EvalInputError, ModelError, ValueError) as exc:
        print(f"ragmon chunking: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not result.questions:
        print("ragmon chunking: no question of the eval set has a gold document in the corpus", file=sys.stderr)
        return EXIT_USAGE
    report = {
        "corpus": str(args.corpus), "evalset": str(args.evalset), "retriever": args.retriever,
        "documents": len(docs), "questions": result.questions, "skipped_questions": result.skipped_questions,
        "unknown_gold_ids": result.unknown_gold_ids[:100], "ks": list(ks), "primary_k": k,
        "best": result.best, "configs": result.configs, "wall_s": round(time.perf_counter() - started, 2),
    }
    plot_path = args.plot or (args.out.with_suffix(".svg") if args.out is not None else None)
    try:
        if args.out is not None:
            _write(args.out, json.dumps(report, indent=2) + "\n")
        if plot_path is not None:
            title = f"{Path(args.corpus).name}: {args.retriever}, {result.questions} questions"
            _write(plot_path, grid_svg(result.configs, [f"recall@{k}", f"ndcg@{k}"], best=result.best, title=title))
    except OSError as exc:
        print(f"ragmon chunking: cannot write output: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(render_table(result, k), end="")
    if result.skipped_questions:
        print(f"{result.skipped_questions} question(s) without a relevant gold id in the corpus were left out "
              f"({len(result.unknown_gold_ids)} unknown gold id(s))")
    return EXIT_OK


__all__ = ["add_arguments", "configs_from_args", "render_table", "run"]
