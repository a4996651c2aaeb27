"""The activation ranges of the local judge's int8 path (``ragmon/scoring/local/onnx_int8.py``).

    python bench/calibrate_int8.py [--texts 3000]   # needs the ``onnx`` package (not a dependency)

Runs the bundled MiniLM in float32 on sentences the fidelity table does not use (HotpotQA
passages and questions, SciFact abstracts and claims from the bench data, ``make benchdata``), in
the judge's length-bucketed batches, and prints each int8-weight product's input range over the
real tokens (padding rows left out), as the ``BUNDLED_RANGES`` table to paste into
``onnx_int8.py``; it exposes the products' inputs as graph outputs with the ``onnx`` package (a
runtime dependency: the rewrite itself uses it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchdata import require  # noqa: E402
from ragmon.scoring.local.embedder import Embedder, bundled_model_path  # noqa: E402
from ragmon.scoring.local.onnx_int8 import int8_products  # noqa: E402
from ragmon.scoring.onnx_runner import length_buckets  # noqa: E402
from ragmon.scoring.text import split_sentences  # noqa: E402

NEEDS = ("retrieval/hotpotqa_dev_103.json", "retrieval/scifact/corpus.jsonl.gz", "retrieval/scifact/queries.test.jsonl")


def calibration_texts(n: int) -> list[str]:
    data = require(*NEEDS) / "retrieval"
    texts: list[str] = []
    for row in json.loads((data / "hotpotqa_dev_103.json").read_text(encoding="utf-8")):
        texts.append(row["question"])
        for _, sentences in row["context"]:
            texts += [s.strip() for s in sentences if s.strip()]
    with gzip.open(data / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for k, line in enumerate(fh):
            if k >= 300:
                break
            doc = json.loads(line)
            body = doc.get("text", "")
            texts.append(doc.get("title", ""))
            texts += split_sentences(body if isinstance(body, str) else " ".join(body))
    for line in (data / "scifact" / "queries.test.jsonl").read_text(encoding="utf-8").splitlines():
        texts.append(json.loads(line)["text"])
    unique = list(dict.fromkeys(t for t in texts if t))
    random.Random(0).shuffle(unique)
    return unique[:n]


def main(argv: list[str] | None = None) -> int:
    import onnx
    import onnxruntime as ort

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=3000)
    args = ap.parse_args(argv)
    path = bundled_model_path()
    products = int8_products(path.read_bytes())
    inputs = {p.matmul.name: p.matmul.inputs[0] for p in products}
    model = onnx.load(str(path))
    for name in dict.fromkeys(inputs.values()):
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()][1:]
    texts = calibration_texts(args.texts)
    tokenizer = Embedder(int8=False)._tokenizer
    ids = [np.asarray(e.ids, dtype=np.int64) for e in tokenizer.encode_batch(texts)]
    lo = dict.fromkeys(outputs, np.inf)
    hi = dict.fromkeys(outputs, -np.inf)
    for idx in length_buckets([len(x) for x in ids], 32):
        lengths = np.array([len(ids[i]) for i in idx])
        batch = np.zeros((len(idx), int(lengths.max())), dtype=np.int64)
        for row, i in zip(batch, idx, strict=True):
            row[: len(ids[i])] = ids[i]
        mask = np.arange(batch.shape[1])[None, :] < lengths[:, None]
        feed = {"input_ids": batch, "attention_mask": mask.astype(np.int64), "token_type_ids": np.zeros_like(batch)}
        for name, value in zip(outputs, session.run(outputs, feed), strict=True):
            real = value[mask] if value.shape[:2] == mask.shape else value
            lo[name] = min(lo[name], float(real.min()))
            hi[name] = max(hi[name], float(real.max()))
    print(f"# {len(texts)} texts, {sum(len(x) for x in ids)} tokens")
    print("BUNDLED_RANGES: dict[str, tuple[float, float]] = {")
    for node, name in inputs.items():
        print(f'    "{node}": ({lo[name]:.6g}, {hi[name]:.6g}),')
    print("}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
