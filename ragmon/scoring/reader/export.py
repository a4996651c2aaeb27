"""The trained reader to the shipped file: ONNX (torch's exporter), then int8 weights with
onnxruntime's dynamic quantization, then a check that the int8 model says what the trained one
says on probe pairs, and the model card.

    python -m ragmon.scoring.reader.export --checkpoint .cache/reader/best

Writes ``assets/reader-int8.onnx``, ``assets/reader-card.json`` (sources, command, metrics, the
probe pairs with the fp32 and int8 probabilities) and prints the file's sha256, which goes into
``model.READER_SHA256``. Needs the ``train`` extra.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..onnx_runner import file_sha256
from .data import manifest

ASSETS = Path(__file__).with_name("assets")
MODEL_FILE = "reader-int8.onnx"
CARD_FILE = "reader-card.json"
log = logging.getLogger("ragmon.reader.export")

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


def export(checkpoint: Path, out_dir: Path = ASSETS, opset: int = 17) -> dict[str, Any]:
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoTokenizer, BertForSequenceClassification

    from .model import Reader
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
        quantize_dynamic(str(fp32_path), str(target), weight_type=QuantType.QInt8, per_channel=True)
    reader = Reader(target, sha256=None)
    int8 = reader.read(list(PROBES))
    probes = [{"premise": p, "claim": h, "fp32": [round(float(x), 5) for x in f],
               "int8": [round(float(x), 5) for x in i]} for (p, h), f, i in zip(PROBES, fp32, int8, strict=True)]
    return {"sha256": file_sha256(target), "bytes": target.stat().st_size, "probes": probes,
            "max_abs_diff": float(np.abs(fp32 - int8).max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=Path(".cache/reader/best"))
    ap.add_argument("--out-dir", type=Path, default=ASSETS)
    ap.add_argument("--train-log", type=Path, nargs="*", default=None,
                    help="train_log.jsonl of each stage (default: the one beside the checkpoint)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = export(args.checkpoint, args.out_dir)
    logs = args.train_log or [args.checkpoint.parent / "train_log.jsonl"]
    stages = [[json.loads(line) for line in log.read_text().splitlines()] for log in logs if log.exists()]
    card = {
        "model": "ragmon reader: MiniLM-L6 (all-MiniLM-L6-v2 weights) fine-tuned as a 3-way cross-encoder "
                 "(supported / unsupported / contradicted) over (premise window, claim)",
        "file": MODEL_FILE, "sha256": result["sha256"], "bytes": result["bytes"],
        "weights": manifest()["weights"],
        "sources": [{k: s[k] for k in ("name", "url", "sha256", "licence")} for s in manifest()["sources"]],
        "command": "make train-reader (python -m ragmon.scoring.reader.train, then python -m "
                   "ragmon.scoring.reader.export)",
        "stages": [{"training": next((e for e in events if e.get("event") == "start"), {}),
                    "dev": [e for e in events if e.get("event") == "dev"]} for events in stages],
        "probes": result["probes"], "probe_max_abs_diff_fp32_vs_int8": result["max_abs_diff"],
    }
    (args.out_dir / CARD_FILE).write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    log.info("wrote %s (%d bytes, sha256 %s); probe max |fp32 - int8| %.4f", args.out_dir / MODEL_FILE,
             result["bytes"], result["sha256"], result["max_abs_diff"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
