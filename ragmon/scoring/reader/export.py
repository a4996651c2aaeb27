"""The trained reader to the shipped file: ONNX (torch's exporter), then int8 weights with
onnxruntime's dynamic quantization (7-bit weights: ``seven_bit``, the same integers on AVX2-only and
VNNI CPUs), then the attention's NaN guards removed (``without_nan_guards``) and the activations'
ranges fixed (``fixed_ranges``: measured on the first ``CALIBRATION_PAIRS`` training pairs of stage 2,
so no verdict depends on its batch), then a check that the int8 model says what the trained one says
on probe pairs, and the model card.

    python -m ragmon.scoring.reader.export --checkpoint .cache/reader/best
    python -m ragmon.scoring.reader.export --only-rewrite   # the same rewrites of the shipped file
                                                            # (its weights halved to 7 bits if wider)

Writes ``assets/reader-int8.onnx``, ``assets/reader-card.json`` (sources, command, metrics, the
probe pairs with the fp32 and int8 probabilities) and prints the file's sha256, which goes into
``model.READER_SHA256``. Needs the ``train`` extra.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ... import env as ragmon_env
from ..onnx_runner import cpu_model, file_sha256
from .data import build_pairs, default_benchdata, manifest
from .fixed_ranges import activation_ranges, quantized_inputs, with_fixed_ranges
from .seven_bit import seven_bit_weights

ASSETS = Path(__file__).with_name("assets")
MODEL_FILE = "reader-int8.onnx"
CARD_FILE = "reader-card.json"
log = logging.getLogger("ragmon.reader.export")
# Training pairs the activations' ranges are measured on (stage 2's order: RAGTruth training-fold
# claims, their one-edit contradictions and replayed NLI pairs; never a dev or held-out pair)
CALIBRATION_PAIRS = 1500
INT8_NOTE = (f"int8 weights (per column, held to 7 bits: |q| <= 64, so AVX2-only and VNNI CPUs compute the same "
             f"integers) and activations (one fixed uint8 range per product input, measured on the first "
             f"{CALIBRATION_PAIRS} stage-2 training pairs): a claim's probabilities do not depend on its batch")

# Probe pairs: the exported int8 model must agree with the trained fp32 one on these (tests read
# them back from the card and rerun the shipped file).
PROBES = (
    ("The museum opens at 9 am and closes at 5 pm on weekdays.", "The museum closes at 5 pm on weekdays."),
    ("The museum opens at 9 am and closes at 5 pm on weekdays.", "The museum does not close at 5 pm on weekdays."),
    ("The museum opens at 9 am and closes at 5 pm on weekdays.", "The museum closes at 8 pm on weekdays."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 with Pierre Curie.", "Marie Curie won a Nobel Prize."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 with Pierre Curie.", "Marie Curie was born in Warsaw."),
    ("Refunds are issued within 14 days of the return being received.",
     "Refunds are not issued within 14 days of the return being received."),
    ("The patient should take the tablet twice a day with food.", "Take the tablet twice daily with meals."),
    ("Acme Corp acquired Beta Ltd in March 2021 for $40 million.", "Beta Ltd acquired Acme Corp in March 2021."),
)


def without_nan_guards(model: bytes) -> tuple[bytes, int]:
    """The model without the exporter's ``Where(IsNaN(softmax), 0, softmax)`` after each attention
    softmax, and how many were removed. A softmax row is NaN only when all its keys are masked, which
    the reader's feeds never hold (every row has its [CLS] and [SEP] tokens), so the outputs are
    bit-identical; the guard's broadcast ``Where`` on every attention matrix was a fifth of the run."""
    from ..local.onnx_int8 import graph_of, load

    proto = load(model)
    g = graph_of(proto)
    dropped: set[int] = set()
    rename: dict[str, str] = {}
    for where in g.nodes:
        isnan = g.producer.get(where.input[0]) if where.op_type == "Where" and len(where.input) == 3 else None
        if (isnan is not None and isnan.op_type == "IsNaN" and isnan.input[0] == where.input[2]
                and g.uses(isnan.output[0]) == 1):
            dropped |= {id(where), id(isnan)}
            rename[where.output[0]] = where.input[2]
    if not dropped:
        return model, 0
    kept = [n for n in g.nodes if id(n) not in dropped]
    for node in kept:
        node.input[:] = [rename.get(name, name) for name in node.input]
    read = {name for node in kept for name in node.input} | {o.name for o in proto.graph.output}
    kept = [n for n in kept if n.op_type != "Constant" or n.output[0] in read]  # the guards' zeros
    del proto.graph.node[:]
    proto.graph.node.extend(kept)
    return proto.SerializeToString(), len(dropped) // 2


def export(checkpoint: Path, calibration: list[tuple[str, str]], out_dir: Path = ASSETS,
           opset: int = 17) -> dict[str, Any]:
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoTokenizer, BertForSequenceClassification

    from .train import MAX_LENGTH

    model = BertForSequenceClassification.from_pretrained(checkpoint).eval()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    enc = tokenizer([p for p, _ in PROBES], [h for _, h in PROBES], truncation="only_first",
                    max_length=MAX_LENGTH, padding=True, return_tensors="pt")
    with torch.no_grad():
        fp32 = torch.softmax(model(**enc).logits, dim=-1).numpy()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fp32_path = Path(tmp) / "reader-fp32.onnx"
        torch.onnx.export(
            model, (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]), str(fp32_path),
            input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logits"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in ("input_ids", "attention_mask", "token_type_ids")}
            | {"logits": {0: "batch"}},
            opset_version=opset, dynamo=False,
        )
        onnx.checker.check_model(str(fp32_path))
        target = out_dir / MODEL_FILE
        # reduce_range: 7-bit weights, so AVX2's saturating int16 sums never clip (seven_bit.py)
        quantize_dynamic(str(fp32_path), str(target), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True)
    rewrite(target, calibration)
    return probed(target, fp32)


def probed(target: Path, fp32: np.ndarray) -> dict[str, Any]:
    """The shipped file's card entries: its sha256 and size, and its probabilities on the probe pairs
    beside the trained model's (``fp32``), as the judge runs it."""
    from .model import Reader

    int8 = Reader(target, sha256=None).read(list(PROBES))
    probes = [{"premise": p, "claim": h, "fp32": [round(float(x), 5) for x in f],
               "int8": [round(float(x), 5) for x in i]} for (p, h), f, i in zip(PROBES, fp32, int8, strict=True)]
    return {"sha256": file_sha256(target), "bytes": target.stat().st_size, "probes": probes,
            "max_abs_diff": float(np.abs(fp32 - int8).max())}


def calibration_pairs(data_dir: Path, benchdata: Path, extra: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The (premise, claim) pairs the activations' ranges are measured on: stage 2's first training
    pairs, with the optional sources stage 2 read (``extra``)."""
    train = (p for p in build_pairs(data_dir, benchdata, stage=2, download=False, extra=extra) if p.split == "train")
    return [(p.premise, p.claim) for p, _ in zip(train, range(CALIBRATION_PAIRS), strict=False)]


def rewrite(path: Path, calibration: list[tuple[str, str]]) -> dict[str, int]:
    """``without_nan_guards``, ``with_fixed_ranges`` (ranges measured on ``calibration``) and
    ``seven_bit_weights`` on the model file at ``path``, in place; how many guards, products and
    weights each rewrote (0: already done)."""
    from .model import BATCH_SIZE, pair_feeds, pair_tokenizer

    model, guards = without_nan_guards(path.read_bytes())
    products = 0
    if quantized_inputs(model):
        feeds = (f for _, f, _ in pair_feeds(pair_tokenizer(), calibration, BATCH_SIZE))
        model, products = with_fixed_ranges(model, activation_ranges(model, feeds))
    model, weights = seven_bit_weights(model)
    if guards or products or weights:
        path.write_bytes(model)
    return {"nan_guards_removed": guards, "products_with_fixed_ranges": products, "weights_halved_to_7_bits": weights}


def rewrite_shipped(out_dir: Path, calibration: list[tuple[str, str]]) -> dict[str, Any]:
    """The rewrites on an already exported file, its card's sha256, size and int8 probes rerun
    (the trained model's probabilities come from the card: no torch needed)."""
    card: dict[str, Any] = json.loads((out_dir / CARD_FILE).read_text(encoding="utf-8"))
    target = out_dir / MODEL_FILE
    done = rewrite(target, calibration)
    log.info("rewrites: %s", done)
    result = probed(target, np.array([p["fp32"] for p in card["probes"]]))
    card.update(sha256=result["sha256"], bytes=result["bytes"], probes=result["probes"],
                probe_max_abs_diff_fp32_vs_int8=result["max_abs_diff"], probes_read_on=cpu_model(), int8=INT8_NOTE)
    if any(done.values()):  # what was done to the exported file since, and how
        card.setdefault("rewrites", []).append({"command": "python -m ragmon.scoring.reader.export --only-rewrite",
                                                **{k: v for k, v in done.items() if v}})
    (out_dir / CARD_FILE).write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=Path(".cache/reader/best"))
    ap.add_argument("--out-dir", type=Path, default=ASSETS)
    ap.add_argument("--train-log", type=Path, nargs="*", default=None,
                    help="train_log.jsonl of each stage (default: the one beside the checkpoint)")
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get(ragmon_env.READER_DATA, ".cache/reader-data")))
    ap.add_argument("--benchdata", type=Path, default=default_benchdata())
    ap.add_argument("--only-rewrite", action="store_true",
                    help="only rewrite the file in --out-dir (NaN guards out, fixed ranges) and rerun its card's "
                         "probes (no torch)")
    ap.add_argument("--extra", nargs="*", default=[], metavar="SOURCE",
                    help="the optional manifest sources stage 2 read (its --extra)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    calibration = calibration_pairs(args.data_dir, args.benchdata, args.extra)
    result = (rewrite_shipped(args.out_dir, calibration) if args.only_rewrite
              else export(args.checkpoint, calibration, args.out_dir))
    log.info("wrote %s (%d bytes, sha256 %s); probe max |fp32 - int8| %.4f", args.out_dir / MODEL_FILE,
             result["bytes"], result["sha256"], result["max_abs_diff"])
    if args.only_rewrite:
        return 0
    logs = args.train_log or [args.checkpoint.parent / "train_log.jsonl"]
    stages = [[json.loads(line) for line in log.read_text().splitlines()] for log in logs if log.exists()]
    card = {
        "model": "ragmon reader: MiniLM-L6 (all-MiniLM-L6-v2 weights) fine-tuned as a 3-way cross-encoder "
                 "(supported / unsupported / contradicted) over (premise window, claim)",
        "file": MODEL_FILE, "sha256": result["sha256"], "bytes": result["bytes"],
        "weights": manifest()["weights"],
        "sources": [{k: s[k] for k in ("name", "url", "sha256", "licence")} for s in manifest()["sources"]
                    if not s.get("optional") or s["name"] in args.extra],
        "command": "make train-reader (python -m ragmon.scoring.reader.train, then python -m "
                   "ragmon.scoring.reader.export)",
        "stages": [{"training": next((e for e in events if e.get("event") == "start"), {}),
                    "dev": [e for e in events if e.get("event") == "dev"]} for events in stages],
        "probes": result["probes"], "probe_max_abs_diff_fp32_vs_int8": result["max_abs_diff"],
        "probes_read_on": cpu_model(),  # the int8 column: products differ a little with and without VNNI
        "int8": INT8_NOTE,
    }
    (args.out_dir / CARD_FILE).write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
