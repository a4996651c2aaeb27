"""Start-up cost of the local judge's embedder: int8 (the ``onnx`` graph rewrite) against float32.

    python bench/judge_start.py [--rounds 5]

Each round starts two fresh Python processes in turn, one per path, and times in each: importing
``onnx`` (the int8 path only: the rewrite needs it), rewriting the bundled model
(``onnx_int8.int8_matmuls``) and building the whole ``Embedder`` (file check, rewrite, onnxruntime
session, tokenizer; ``onnx`` is already imported by then, so the int8 path's start-up is the import
plus the ``Embedder``). Medians over the rounds are printed with the CPU model and flags (``cpu_model``),
to paste into docs/benchmarks.md. The model file is read once before timing, so the page cache
holds it in both paths.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ragmon.scoring.onnx_runner import cpu_model  # noqa: E402

CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
from ragmon.scoring.local.embedder import Embedder, bundled_model_path
model = bundled_model_path().read_bytes()
out = {{}}
if {int8}:
    t = time.perf_counter(); import onnx; out["import_onnx_s"] = time.perf_counter() - t
    from ragmon.scoring.local import onnx_int8
    t = time.perf_counter(); _, count = onnx_int8.int8_matmuls(model, onnx_int8.BUNDLED_RANGES)
    out["rewrite_s"] = time.perf_counter() - t
    assert count == 36
t = time.perf_counter(); e = Embedder(int8={int8}); out["embedder_s"] = time.perf_counter() - t
assert e.int8 is {int8}
print(json.dumps(out))
"""


def run(int8: bool) -> dict[str, float]:
    code = CHILD.format(root=str(ROOT), int8=int8)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    int8_runs, float_runs = [], []
    for _ in range(args.rounds):
        int8_runs.append(run(True))
        float_runs.append(run(False))

    def median(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"CPU: {cpu_model()}")
    print(f"medians of {args.rounds} rounds, fresh processes in turn:")
    total = statistics.median(r["import_onnx_s"] + r["embedder_s"] for r in int8_runs)
    print(f"  int8:    import onnx {median(int8_runs, 'import_onnx_s'):.3f} s, rewrite "
          f"{median(int8_runs, 'rewrite_s'):.3f} s, Embedder(int8=True) {median(int8_runs, 'embedder_s'):.3f} s "
          f"(with the rewrite; start-up in all, import included: {total:.3f} s)")
    print(f"  float32: Embedder(int8=False) {median(float_runs, 'embedder_s'):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
