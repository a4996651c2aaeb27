"""The reader's int8 products with fixed activation ranges, so that a claim's verdict does not
depend on the claims read beside it.

onnxruntime's dynamic quantization (the export's int8 step) measures each product input's range
on every run: one scale for the whole batch, padding included. A claim's probabilities then moved
with its batch (up to 0.19 on the reader's dev pairs, read alone against read in batches of 16),
and a verdict could cross the 0.9 cut for that reason alone. ``with_fixed_ranges`` replaces each
``DynamicQuantizeLinear`` with a ``QuantizeLinear`` whose range was measured once, at export
(``activation_ranges``: the extremes over real tokens of training pairs; a value outside is
clipped), and each ``MatMulInteger -> Cast -> Mul(scale) [-> Add(bias)]`` with one
``com.microsoft.MatMulIntegerToFloat`` over the same int8 weights and scales: with a fixed range
onnxruntime no longer fuses that chain by itself, and unfused it is slower than the dynamic model.
Each token row is then quantized on its own, as in the embedder's rewrite (``local/onnx_int8``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..local.onnx_int8 import graph_of, load

_MS = "com.microsoft"


def quantized_inputs(model: bytes) -> list[str]:
    """The float inputs the model quantizes per run (one per ``DynamicQuantizeLinear``)."""
    return [n.input[0] for n in load(model).graph.node if n.op_type == "DynamicQuantizeLinear"]


def activation_ranges(model: bytes, feeds: Iterable[Mapping[str, np.ndarray]]) -> dict[str, tuple[float, float]]:
    """(min, max) of each per-run quantized input over ``feeds``' real tokens (rows a token-level
    tensor holds for padding are left out; ``attention_mask`` says which)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    names = quantized_inputs(model)
    proto = load(model)
    proto.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    takes = {i.name for i in session.get_inputs()}
    low = dict.fromkeys(names, np.inf)
    high = dict.fromkeys(names, -np.inf)
    for feed in feeds:
        real = np.asarray(feed["attention_mask"]).astype(bool)
        values = session.run(names, {k: v for k, v in feed.items() if k in takes})
        for name, value in zip(names, values, strict=True):
            rows = value[real] if value.ndim == 3 else value  # (batch, tokens, d) or pooled (batch, d)
            low[name] = min(low[name], float(rows.min()))
            high[name] = max(high[name], float(rows.max()))
    return {name: (low[name], high[name]) for name in names}


def _uint8_grid(low: float, high: float) -> tuple[float, int]:
    """Scale and zero point of the uint8 grid over [low, high] widened to hold 0 (as onnxruntime's
    dynamic quantization does per run)."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = (high - low) / 255.0 or 1.0
    return scale, min(255, max(0, round(-low / scale)))


def with_fixed_ranges(model: bytes, ranges: Mapping[str, tuple[float, float]]) -> tuple[bytes, int]:
    """The dynamically quantized ``model`` with every per-run quantization replaced by the fixed
    ``ranges`` (keyed by the quantized input's name; each must be named) and every integer product
    run as ``MatMulIntegerToFloat``; and how many products were rewritten (0: returned as is)."""
    from onnx import TensorProto, helper

    proto = load(model)
    g = graph_of(proto)
    scalars = {init.name for init in proto.graph.initializer}
    replaced: dict[int, list[Any]] = {}  # id(node) -> the nodes replacing it (none: dropped)
    grids: list[Any] = []
    for node in g.nodes:
        if node.op_type != "DynamicQuantizeLinear":
            continue
        if node.input[0] not in ranges:
            raise ValueError(f"no fixed range for {node.input[0]!r}")
        scale, zero = _uint8_grid(*ranges[node.input[0]])
        quantized, scale_name, zero_name = node.output
        grids += [helper.make_tensor(scale_name, TensorProto.FLOAT, [], [scale]),
                  helper.make_tensor(zero_name, TensorProto.UINT8, [], [zero])]
        replaced[id(node)] = [helper.make_node("QuantizeLinear", [node.input[0], scale_name, zero_name],
                                               [quantized], name=node.name)]
    rewritten = 0
    for node in g.nodes:
        if node.op_type != "MatMulInteger" or len(node.input) != 4:
            continue
        cast = g.only_consumer(node.output[0], "Cast")
        mul = g.only_consumer(cast.output[0], "Mul") if cast is not None else None
        if cast is None or mul is None:
            continue
        product_scale = g.producer.get(next(i for i in mul.input if i != cast.output[0]))
        if product_scale is None or product_scale.op_type != "Mul" or g.uses(product_scale.output[0]) != 1:
            continue
        a_scale, w_scale = product_scale.input
        if a_scale in scalars and w_scale not in scalars:  # the weights' scale is the initializer
            a_scale, w_scale = w_scale, a_scale
        add = g.only_consumer(mul.output[0], "Add")
        bias = next((i for i in add.input if i != mul.output[0]), None) if add is not None else None
        if bias not in scalars:
            add, bias = None, None
        a_q, w_q, a_zero, w_zero = node.input
        inputs = [a_q, w_q, a_scale, w_scale, a_zero, w_zero, *([bias] if bias else [])]
        replaced[id(node)] = [helper.make_node("MatMulIntegerToFloat", inputs, [(add or mul).output[0]],
                                               name=(node.name or node.output[0]) + "_to_float", domain=_MS)]
        for done in (cast, mul, product_scale, *([add] if add is not None else [])):
            replaced[id(done)] = []
        rewritten += 1
    if not replaced:
        return model, 0
    nodes = [new for node in g.nodes for new in replaced.get(id(node), [node])]
    read = {name for node in nodes for name in node.input} | {o.name for o in proto.graph.output}
    kept = [init for init in proto.graph.initializer if init.name in read]
    del proto.graph.node[:]
    proto.graph.node.extend(nodes)
    del proto.graph.initializer[:]
    proto.graph.initializer.extend([*kept, *grids])
    if not any(o.domain == _MS for o in proto.opset_import):
        proto.opset_import.append(helper.make_opsetid(_MS, 1))
    return proto.SerializeToString(), rewritten
