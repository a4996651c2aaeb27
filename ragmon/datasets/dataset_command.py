"""``ragmon dataset synth | harvest | label``: build a golden set (docs/evaluation.md).

Exit codes: 0 done, 1 fewer rows than asked for (synth) or nothing to harvest, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .. import env
from ..config import load_section
from ..errors import ConfigError, EvalInputError, ModelError
from ..evaluation.goldenset import load_golden_set
from ..export.judged import sink_files
from .chunking import MODES, ChunkingConfig
from .corpus import load_corpus
from .harvest import harvest, read_judged
from .synth import ADVERSARIAL, FACTOID, MULTI_HOP, Synthesizer, SynthOptions

NAME: Final = "dataset"
HELP: Final = "build a golden set: synth (LLM) | harvest (production) | label (terminal)"
DESCRIPTION: Final = (
    "Build the golden set ragmon eval reads: generate questions from a corpus, harvest judged production "
    "traces into candidates, label candidates in the terminal (docs/evaluation.md)."
)

EXIT_OK = 0
EXIT_SHORT = 1
EXIT_USAGE = 2

ENV_BASE_URL = env.SYNTH_BASE_URL
ENV_MODEL = env.SYNTH_MODEL
ENV_API_KEY = env.SYNTH_API_KEY


@dataclass(frozen=True, slots=True)
class JudgeFallback:
    """The judge's settings the generator falls back to, read through the agent's settings table."""

    judge_base_url: str | None
    judge_model: str | None
    judge_api_key: str | None = field(repr=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dataset_command", required=True, metavar="{synth,harvest,label}")
    synth = sub.add_parser("synth", help="generate questions from a corpus with an OpenAI-compatible LLM",
                           description="Sample chunks of the corpus and ask an LLM for a fact and a question "
                           "answered by it alone (plus adversarial and multi-hop questions); rate realism, drop "
                           "near-duplicates, write golden-set rows with their provenance.")
    synth.add_argument("corpus", help="directory of .txt/.md files, or JSONL {id, title, text}")
    synth.add_argument("--n", type=int, required=True, help="rows to write")
    synth.add_argument("--out", type=Path, required=True, metavar="FILE.jsonl", help="golden-set rows (overwritten)")
    synth.add_argument("--adversarial", action="store_true",
                       help="add hard questions worded like nearby chunks but answered by one")
    synth.add_argument("--multi-hop", action="store_true", help="add questions that need two linked chunks")
    synth.add_argument("--no-factoid", action="store_true", help="only the kinds asked for by the flags above")
    synth.add_argument("--base-url", default=None, help=f"OpenAI-compatible base URL (or {ENV_BASE_URL}, "
                       "else RAGMON_JUDGE_BASE_URL)")
    synth.add_argument("--model", default=None, help=f"generator chat model (or {ENV_MODEL})")
    synth.add_argument("--judge-model", default=None,
                       help="the model that will judge this golden set, for the self-judging warning "
                       "(default RAGMON_JUDGE_MODEL)")
    synth.add_argument("--rater-model", default=None,
                       help="model that rates realism and checks answers (default: the generator)")
    synth.add_argument("--no-answer-check", action="store_true",
                       help="keep questions without asking the rater whether their fact answers them")
    synth.add_argument("--min-realism", type=int, default=4, help="keep questions rated at least this, 1-5 "
                       "(default 4; 0 = no rating)")
    synth.add_argument("--dedup-threshold", type=float, default=0.9,
                       help="drop a question this similar (MiniLM cosine) to a kept one (default 0.9)")
    synth.add_argument("--chunk-size", type=int, default=256, help="chunk size in tokens (default 256)")
    synth.add_argument("--chunk-mode", choices=MODES, default="paragraph", help="chunking mode (default paragraph)")
    synth.add_argument("--chunk-overlap", type=float, default=0.0, metavar="TOKENS|FRACTION",
                       help="overlap of neighbouring chunks: tokens, or a fraction of the size below 1 (default 0)")
    synth.add_argument("--no-title", action="store_true", help="do not prefix chunks with the document title")
    synth.add_argument("--count-title", action="store_true",
                       help="the prefixed title counts towards --chunk-size (as in ragmon chunking --count-title on)")
    synth.add_argument("--min-distractor-terms", type=int, default=1,
                       help="distractor words an adversarial question must use (default 1; 2 asks more)")
    synth.add_argument("--seed", type=int, default=0, help="chunk sampling seed (default 0)")
    synth.add_argument("--temperature", type=float, default=0.7, help="generation temperature (default 0.7)")
    synth.add_argument("--concurrency", type=int, default=4, help="LLM calls at once (default 4)")
    synth.add_argument("--timeout", type=float, default=60.0, help="seconds per LLM request (default 60)")
    synth.add_argument("--max-retries", type=int, default=4, help="retries on 429/5xx/timeouts (default 4)")
    synth.add_argument("--stats", type=Path, default=None, metavar="FILE.json", help="write the run's counts")
    synth.set_defaults(func=run_synth)

    harvest_p = sub.add_parser("harvest", help="sample judged production traces into unlabelled candidates",
                               description="Read the agent's --export-judged files and draw a sample stratified by "
                               "pipeline, verdict and score band; the retrieved ids become candidate gold documents.")
    harvest_p.add_argument("judged", help="the agent's --export-judged PATH (its rotated files are read too), "
                           "or a directory of them")
    harvest_p.add_argument("--n", type=int, required=True, help="candidates to draw")
    harvest_p.add_argument("--out", type=Path, required=True, metavar="CANDIDATES.jsonl")
    harvest_p.add_argument("--seed", type=int, default=0)
    harvest_p.add_argument("--max-docs", type=int, default=10, help="retrieved ids kept per candidate (default 10)")
    harvest_p.add_argument("--allocation", choices=("balanced", "proportional"), default="balanced",
                           help="strata take turns (balanced, default) or get shares of their size")
    harvest_p.set_defaults(func=run_harvest)

    label = sub.add_parser("label", help="label candidates in the terminal (golden set, or --mode judge for "
                           "ragmon calibrate --fit); resumable",
                           description="Walk through candidates: confirm or pick the gold documents, accept or "
                           "write the reference answer, set type and difficulty, or skip (--mode judge: say "
                           "whether the answer is faithful, answers the question, which contexts are relevant). "
                           "q quits; the same command resumes.")
    label.add_argument("candidates", help="candidate rows (ragmon dataset harvest --out)")
    label.add_argument("--out", type=Path, required=True, metavar="GOLDEN.jsonl",
                       help="file to append to: the golden set, or with --mode judge the labelled rows for "
                       "ragmon calibrate")
    label.add_argument("--mode", choices=("golden", "judge"), default="golden",
                       help="golden (default): gold documents, reference answer, type, difficulty for ragmon eval; "
                       "judge: is the answer faithful, does it answer the question, which contexts are relevant — "
                       "the calibration format ragmon calibrate --fit reads")
    label.add_argument("--order", choices=("fit", "file"), default=None,
                       help="fit: the traces whose labels help a fit most first (scores near the threshold, "
                       "pipelines taking turns; default with --mode judge); file: as in the file")
    label.add_argument("--answers", type=Path, default=None, metavar="FILE",
                       help="read the answers from FILE, one per line as they would be typed, instead of the "
                       "terminal (scripted runs); at its end the labelling stops and can be resumed")
    label.set_defaults(func=run_label)


def run(args: argparse.Namespace) -> int:
    return int(args.func(args))


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)


def synth_settings(args: argparse.Namespace) -> Any:
    from ..scoring.llm import LlmJudgeSettings

    judge = load_section(JudgeFallback)
    base_url = args.base_url or env.read(ENV_BASE_URL) or judge.judge_base_url
    model = args.model or env.read(ENV_MODEL)
    if not base_url or not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"--base-url / {ENV_BASE_URL}", f"an http(s) URL is required, got {base_url!r}")
    if not model:
        raise ConfigError(f"--model / {ENV_MODEL}", "the generator model is required")
    api_key = env.read(ENV_API_KEY) or judge.judge_api_key
    return LlmJudgeSettings(base_url=base_url, model=model, api_key=api_key, timeout_s=args.timeout,
                            max_retries=args.max_retries, concurrency=max(1, args.concurrency),
                            max_completion_tokens=512)


def run_synth(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    kinds = tuple(k for k, on in ((FACTOID, not args.no_factoid), (ADVERSARIAL, args.adversarial),
                                  (MULTI_HOP, args.multi_hop)) if on)
    try:
        settings = synth_settings(args)
        options = SynthOptions(
            n=args.n, kinds=kinds, generator_model=settings.model,
            judge_model=args.judge_model or load_section(JudgeFallback).judge_model, rater_model=args.rater_model,
            check_answers=not args.no_answer_check, min_realism=args.min_realism, dedup_threshold=args.dedup_threshold,
            chunking=ChunkingConfig.from_fraction(args.chunk_size, args.chunk_overlap, mode=args.chunk_mode,
                                                  title_prefix=not args.no_title, count_title=args.count_title),
            seed=args.seed, temperature=args.temperature, min_distractor_terms=args.min_distractor_terms,
        )
        docs = load_corpus(args.corpus)
    except (ConfigError, EvalInputError, ValueError) as exc:
        print(f"ragmon dataset synth: {exc}", file=sys.stderr)
        return EXIT_USAGE

    async def go() -> Any:
        async with Synthesizer(settings, options) as synthesizer:
            return await synthesizer.run(docs)

    try:
        result = asyncio.run(go())
        _write_jsonl(args.out, result.rows)
        stats = result.stats.as_dict()
        if args.stats is not None:
            args.stats.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    except (ModelError, EvalInputError) as exc:
        print(f"ragmon dataset synth: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"ragmon dataset synth: cannot write output: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for warning in stats["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    dropped = ", ".join(f"{k} {v}" for k, v in stats["dropped"].items()) or "none"
    kinds_line = ", ".join(f"{k} {v}" for k, v in stats["by_kind"].items())
    print(f"wrote {stats['written']} of {stats['requested']} rows to {args.out} ({kinds_line}); "
          f"{stats['candidates']} candidates; dropped: {dropped}")
    print(f"realism ratings: {stats['realism'] or '–'}; {stats['llm_calls']} LLM calls, "
          f"{stats['prompt_tokens']} prompt + {stats['completion_tokens']} completion tokens"
          f"{' (estimated)' if stats['tokens_estimated'] else ''}")
    if stats["stopped"]:
        print(f"stopped early: {stats['stopped']}", file=sys.stderr)
    return EXIT_OK if stats["written"] >= stats["requested"] else EXIT_SHORT


def run_harvest(args: argparse.Namespace) -> int:
    try:
        files = sink_files(args.judged)
        if not files:
            raise EvalInputError(f"no judged-trace file at {args.judged!r}")
        rows, summary = harvest(read_judged(files), args.n, seed=args.seed, max_docs=args.max_docs,
                                allocation=args.allocation)
        _write_jsonl(args.out, rows)
    except (EvalInputError, ValueError) as exc:
        print(f"ragmon dataset harvest: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"ragmon dataset harvest: cannot write output: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{summary['candidates']} candidate(s) from {summary['traces']} judged trace(s) in {len(files)} file(s) "
          f"-> {args.out}")
    for stratum, count in sorted(summary["picked"].items()):
        print(f"  {stratum}: {count} of {summary['strata'][stratum]}")
    if summary["skipped"]:
        print("  skipped: " + ", ".join(f"{k} {v}" for k, v in summary["skipped"].items()))
    return EXIT_OK if rows else EXIT_SHORT


def run_label(args: argparse.Namespace) -> int:
    from .judge_label import JudgeLabeller, order_candidates
    from .label import Labeller

    try:
        candidates = load_golden_set(args.candidates)
    except EvalInputError as exc:
        print(f"ragmon dataset label: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for problem in candidates.problems:
        print(f"ragmon dataset label: line {problem.line}: {problem.message}", file=sys.stderr)
    rows = list(candidates.rows)
    if (args.order or ("fit" if args.mode == "judge" else "file")) == "fit":
        rows = order_candidates(rows)
    read: Callable[[str], str] = input
    if args.answers is not None:
        try:
            read = answers_from(args.answers.read_text(encoding="utf-8").splitlines())
        except OSError as exc:
            print(f"ragmon dataset label: cannot read --answers: {exc}", file=sys.stderr)
            return EXIT_USAGE
    labeller = JudgeLabeller if args.mode == "judge" else Labeller
    labeller(rows, args.out, read=read).run()
    return EXIT_OK


def answers_from(lines: list[str]) -> Callable[[str], str]:
    """An ``input`` that answers from ``lines`` (echoing prompt and answer); EOFError at their end."""
    feed = iter(lines)

    def read(prompt: str) -> str:
        try:
            answer = next(feed)
        except StopIteration:
            raise EOFError from None
        print(f"{prompt}{answer}", flush=True)
        return answer

    return read


__all__ = ["add_arguments", "run"]
