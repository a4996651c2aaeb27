"""The int8 path of the bundled MiniLM (``scoring/local/onnx_int8.py``): what the graph rewrite
changes, and that its vectors stay close to the float32 path's."""

from __future__ import annotations

import logging
import sys

import numpy as np
import onnx
import pytest
from google.protobuf.message import DecodeError

from ragmon.scoring.local import LocalJudge, onnx_int8
from ragmon.scoring.local.embedder import Embedder, bundled_model_path, shared_embedder

SENTENCES = [
    "The museum is open from 9 am to 6 pm every day except Monday.",
    "Tickets cost 12 euros for adults; children under 12 enter for free.",
    "When was the Eiffel Tower completed?",
    "The Eiffel Tower was completed in March 1889 for the World's Fair.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "I'm sorry, I don't have any information about that.",
    "The defendant was acquitted of all charges after a three-week trial.",
    "Mix the flour and the butter, then add two eggs and bake for 40 minutes at 180 degrees.",
]


@pytest.fixture(scope="module")
def model() -> bytes:
    return bundled_model_path().read_bytes()


def test_every_weight_product_and_gelu_of_the_bundled_model_is_rewritten(model: bytes) -> None:
    graph = onnx_int8.graph_of(onnx_int8.load(model))
    products = onnx_int8.products(graph)
    assert len(products) == 36  # 6 layers x (query, key, value, output, two feed-forward)
    assert all(p.bias is not None for p in products)
    assert {p.matmul.name for p in products} == set(onnx_int8.BUNDLED_RANGES)
    assert len(onnx_int8.gelus(graph)) == 6
    rewritten, count = onnx_int8.int8_matmuls(model, onnx_int8.BUNDLED_RANGES)
    assert count == 36
    before = [n.op_type for n in graph.nodes]
    after = onnx_int8.load(rewritten)
    ops = [n.op_type for n in after.graph.node]
    # query, key and value share their input (and its range): quantized once per layer
    assert ops.count("MatMulIntegerToFloat") == 36 and ops.count("QuantizeLinear") == 36 - 2 * 6
    assert ops.count("Gelu") == 6 and "Erf" not in ops
    # each product's dequantization (Cast, Mul) and bias Add are gone; other nodes are kept
    assert ops.count("MatMul") == before.count("MatMul") - 36
    assert ops.count("Cast") == before.count("Cast") - 36
    assert any(o.domain == "com.microsoft" for o in after.opset_import)
    onnx.checker.check_model(after)  # a well-formed model (the contrib ops are not checked further)


def test_a_model_without_known_ranges_is_left_alone(model: bytes) -> None:
    assert onnx_int8.int8_matmuls(model, {}) == (model, 0)


def test_bytes_that_are_not_a_model_are_refused() -> None:
    with pytest.raises(DecodeError):
        onnx_int8.int8_matmuls(b"\xff\xff not an onnx model", onnx_int8.BUNDLED_RANGES)


def test_without_the_onnx_package_the_float32_model_runs(monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` now raises ImportError
    with caplog.at_level(logging.WARNING, logger="ragmon.scoring.local.embedder"):
        fallback = Embedder(int8=True)
    assert not fallback.int8
    assert "float32" in caplog.text and "int8" in caplog.text
    assert np.array_equal(fallback.embed(SENTENCES), shared_embedder().embed(SENTENCES))


def test_int8_vectors_stay_close_to_float32() -> None:
    int8, float32 = Embedder(int8=True), shared_embedder()
    assert int8.int8 and not float32.int8
    a, a_states = int8.embed_with_tokens(SENTENCES)
    b, b_states = float32.embed_with_tokens(SENTENCES)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.97 and cos.mean() > 0.985
    # the ranking of sentence pairs (what the judge reads) barely moves
    assert np.abs(a @ a.T - b @ b.T).max() < 0.08
    for x, y in zip(a_states, b_states, strict=True):
        assert x.ids.tolist() == y.ids.tolist()
        token_cos = (x.vectors.astype(np.float32) * y.vectors.astype(np.float32)).sum(axis=1)
        assert token_cos.mean() > 0.97


def test_the_local_judge_runs_int8_unless_told_otherwise() -> None:
    assert LocalJudge(cache_size=0)._analyser.encoder._embedder.int8
    assert not LocalJudge(cache_size=0, int8=False)._analyser.encoder._embedder.int8
