#!/usr/bin/env python3
"""The reader's dev metrics on an int8 file as the judge runs it (onnxruntime, no torch): the same
metrics training chooses its checkpoints by (``train.dev_metrics``), on the same dev pairs (the
split ``data.build_pairs`` carves from the training sources: never a held-out row), beside the fp32
numbers of the model card's best checkpoint of each stage.

    python bench/reader_dev.py                                   # the shipped file
    python bench/reader_dev.py --model X/reader-int8.onnx --card X/reader-card.json --out r.json

This is how a retrained reader is compared with the shipped one ("reproduces its dev metrics within
±0.01"), and how much the int8 export moves them. The DocNLI sources come from
``--data-dir`` / ``RAGMON_READER_DATA`` (checked against the reader's data manifest), the RAGTruth dev
halves from the bench data (``make benchdata``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench._benchdata import benchdata_dir  # noqa: E402
from ragmon import env as ragmon_env  # noqa: E402
from ragmon.scoring import local as _local  # noqa: E402,F401  (imports the judge's modules in their order)
from ragmon.scoring.onnx_runner import cpu_model  # noqa: E402
from ragmon.scoring.reader.data import build_pairs, has_negation  # noqa: E402
from ragmon.scoring.reader.export import CARD_FILE  # noqa: E402
from ragmon.scoring.reader.model import Reader, bundled_path  # noqa: E402
from ragmon.scoring.reader.train import dev_metrics  # noqa: E402
from ragmon.scoring.reader.verdicts import CONTRADICTION_THRESHOLD  # noqa: E402


def card_best(card: dict[str, Any]) -> list[dict[str, Any]]:
    """Each stage's best dev evaluation in the card (the checkpoint the next step started from)."""
    return [max(stage["dev"], key=lambda e: e["score"]) for stage in card.get("stages", []) if stage.get("dev")]


def flagged(dev: list[Any], probs: np.ndarray) -> dict[str, dict[str, int]]:
    """How many pairs of each kind the judge's verdict rule reads as contradicted: supported RAGTruth
    claims (false contradictions; apart, those holding a negation word), entailed NLI pairs, and the
    one-edit contradictions of RAGTruth claims by edit."""
    hit = (probs[:, 2] >= CONTRADICTION_THRESHOLD) & (probs[:, 2] > probs[:, 0])
    groups: dict[str, list[int]] = {
        "supported RAGTruth claims": [i for i, p in enumerate(dev) if p.source.startswith("ragtruth") and p.label == 0],
        "  of them with a negation": [i for i, p in enumerate(dev) if p.source.startswith("ragtruth") and p.label == 0
                                      and has_negation(p.claim)],
        "entailed NLI pairs": [i for i, p in enumerate(dev) if p.source.startswith("docnli") and p.label == 0],
    }
    for kind in sorted({p.source for p in dev if p.source.startswith("edit-rag-")}):
        groups[f"one-edit {kind.removeprefix('edit-rag-')}"] = [i for i, p in enumerate(dev) if p.source == kind]
    return {k: {"flagged": int(hit[idx].sum()) if idx else 0, "pairs": len(idx)} for k, idx in groups.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--model", type=Path, default=bundled_path())
    ap.add_argument("--card", type=Path, default=None, help="its model card (default: beside the model)")
    ap.add_argument("--data-dir", type=Path,
                    default=Path(os.environ.get(ragmon_env.READER_DATA, ROOT / ".cache" / "reader-data")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--extra", nargs="*", default=[], metavar="SOURCE",
                    help="stage 2's optional manifest sources (its --extra): their dev pairs are read too")
    ap.add_argument("--out", type=Path, default=None, metavar="RESULT.json")
    args = ap.parse_args(argv)
    card_path = args.card or args.model.with_name(CARD_FILE)
    card = json.loads(card_path.read_text(encoding="utf-8"))
    reader = Reader(args.model, sha256=None, threads=args.threads)
    result: dict[str, Any] = {"model": str(args.model), "sha256": reader.sha256, "cpu": cpu_model(), "stages": []}
    for stage, fp32 in zip((1, 2), card_best(card) + [{}] * 2, strict=False):
        pairs = build_pairs(args.data_dir, benchdata_dir(), stage=stage, download=False,
                            extra=args.extra if stage == 2 else ())
        dev = [p for p in pairs if p.split == "dev"]
        started = time.perf_counter()
        probs = reader.read([(p.premise, p.claim) for p in dev])
        int8 = dev_metrics(dev, np.asarray(probs))
        entry = {"stage": stage, "dev_pairs": len(dev), "seconds": round(time.perf_counter() - started, 1),
                 "int8": int8, "card_fp32_best": fp32, "flagged_contradicted": flagged(dev, np.asarray(probs))}
        result["stages"].append(entry)
        label = f"; the card's fp32 stage-{stage} checkpoint, step {fp32['step']}, in brackets" if fp32 else ""
        print(f"stage {stage} dev ({len(dev)} pairs{label}): " + "  ".join(
            f"{k} {v:.3f}" + (f" (card: {fp32[k]:.3f})" if k in fp32 else "")
            for k, v in int8.items()), flush=True)
        print(f"  read as contradicted (p >= {CONTRADICTION_THRESHOLD}, above supported): " + "  ".join(
            f"{k} {v['flagged']}/{v['pairs']}" for k, v in entry["flagged_contradicted"].items()), flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
