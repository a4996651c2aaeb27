#!/usr/bin/env python3
"""CPU per trace of the local judge with and without the trained reader, side by side in one
process on the same traces (RAGTruth QA rows of the reader's held-out fold), interleaved so both see
the same machine state; one scoring thread each, as the agent's judge pool runs it.

    python bench/judge_cost.py [--rows 60] [--rounds 3] [--card ragmon/scoring/reader/assets/reader-card.json]

Prints the CPU model and flags, ms per trace (median over rounds of the per-round mean), the
share of claims the reader read (``reader.verdicts.worth_reading``), and its cost per claim read and
per 1,000 tokens: the reader runs one pair per claim read (its premise window), so its cost grows with
claims x window tokens, never with all context sentences. Results: docs/judges.md#the-reader.
``--card`` also records the result in the model card's ``cost`` list, one entry per CPU model (a
later run on the same CPU replaces its entry): the card then says what the file costs where.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


from bench._benchdata import benchdata_file  # noqa: E402
from ragmon.scoring.local import LocalJudge  # noqa: E402
from ragmon.scoring.onnx_runner import cpu_model  # noqa: E402
from ragmon.scoring.reader.data import ragtruth_fold  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--card", type=Path, default=None, help="record the result in this model card's cost list")
    args = ap.parse_args(argv)
    path = benchdata_file("ragtruth_qa_dev.jsonl")
    rows = [r for r in map(json.loads, path.open(encoding="utf-8")) if ragtruth_fold(r) == "heldout"][: args.rows]
    without, with_reader = LocalJudge(reader=False, cache_size=0), LocalJudge(cache_size=0)
    for judge in (without, with_reader):  # warm-up: first runs allocate
        judge.score_sync(rows[0]["question"], rows[0]["contexts"], rows[0]["answer"])
    assert with_reader.reader is not None
    per: dict[str, list[float]] = {"without reader": [], "with reader": []}
    read_s, tokens0, pairs0 = (with_reader.stage_seconds["read"], with_reader.reader.tokens_read,
                               with_reader.reader.pairs_read)
    claims = 0
    for _ in range(args.rounds):
        for name, judge in (("without reader", without), ("with reader", with_reader)):
            t0 = time.process_time()
            for r in rows:
                s = judge.score_sync(r["question"], r["contexts"], r["answer"])
                if judge is with_reader:
                    claims += int(s.details.get("claims", 0))
            per[name].append((time.process_time() - t0) / len(rows) * 1000)
    read_ms = (with_reader.stage_seconds["read"] - read_s) * 1000
    tokens = with_reader.reader.tokens_read - tokens0
    pairs = with_reader.reader.pairs_read - pairs0
    base, full = statistics.median(per["without reader"]), statistics.median(per["with reader"])
    print(f"CPU: {cpu_model()}")
    print(f"{len(rows)} RAGTruth QA traces x {args.rounds} rounds, one thread, CPU time per trace")
    print("| judge | ms / trace | ratio |\n| --- | ---: | ---: |")
    print(f"| local, without reader | {base:.1f} | 1.00 |\n| local, with reader | {full:.1f} | {full / base:.2f} |")
    print(f"reader: {claims / (len(rows) * args.rounds):.1f} claims/trace, {pairs / claims:.0%} of them read, "
          f"{tokens / pairs:.0f} tokens/claim read, {read_ms / pairs:.1f} ms/claim read, "
          f"{read_ms / tokens * 1000:.1f} ms per 1,000 tokens (wall time of the read stage)")
    if args.card is not None:
        record_in_card(args.card, {
            "cpu": cpu_model(), "reader_sha256": with_reader.reader.sha256, "date": time.strftime("%Y-%m-%d"),
            "traces": f"{len(rows)} RAGTruth QA held-out traces x {args.rounds} rounds, one thread",
            "ms_per_trace_without_reader": round(base, 1), "ms_per_trace_with_reader": round(full, 1),
            "ratio": round(full / base, 2), "tokens_per_claim_read": round(tokens / pairs, 1),
            "ms_per_claim_read": round(read_ms / pairs, 1)})
    return 0


def record_in_card(card: Path, entry: dict[str, object]) -> None:
    """The card's ``cost`` list with this CPU's entry replaced (or added)."""
    data = json.loads(card.read_text(encoding="utf-8"))
    if data.get("sha256") != entry["reader_sha256"]:
        raise SystemExit(f"{card} describes {data.get('sha256')}, not the reader measured ({entry['reader_sha256']})")
    data["cost"] = [c for c in data.get("cost", []) if c.get("cpu") != entry["cpu"]] + [entry]
    card.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
