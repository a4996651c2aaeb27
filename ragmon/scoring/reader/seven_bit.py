"""The reader's int8 weights held to 7 bits (|q| <= 64), so that its integer products give the same
result on every x86 CPU.

onnxruntime runs a uint8 x int8 product with the ``vpmaddubsw`` instruction where the CPU has no
VNNI (AVX2-only CPUs): it adds two neighbouring uint8 x int8 products into one *saturating* int16
lane. With full-range weights (|q| up to 127) two such products reach 2 x 255 x 127 = 64,770 and
are clipped to 32,767; a VNNI CPU adds them in int32 and never clips. Measured on an AVX2-only AMD
EPYC, the reader shipped with full-range weights read its probe pairs up to 0.15 away from the same
file on an AVX-512 VNNI CPU. With |q| <= 64 the pair stays under 2 x 255 x 64 = 32,640: no lane
clips, and both CPUs compute the same integers. onnxruntime's quantizer does this with
``reduce_range=True`` (the export's setting); ``seven_bit_weights`` does it to an exported file by
halving each weight (rounded to nearest even) and doubling its per-column scale, which costs the
weights one bit of resolution.
"""

from __future__ import annotations

import numpy as np

from ..local.onnx_int8 import load

LIMIT = 64  # |q| <= 64: two uint8 x int8 products stay within int16 (2 x 255 x 64 = 32,640)
_INTEGER_PRODUCTS = {"MatMulIntegerToFloat": (1, 3), "MatMulInteger": (1, None)}  # weight input, its scale


def widest_weight(model: bytes) -> int:
    """The largest |q| of the int8 weights the model's integer products read (0: none)."""
    from onnx import TensorProto, numpy_helper

    proto = load(model)
    inits = {i.name: i for i in proto.graph.initializer}
    widest = 0
    for node in proto.graph.node:
        if node.op_type in _INTEGER_PRODUCTS:
            init = inits.get(node.input[_INTEGER_PRODUCTS[node.op_type][0]])
            if init is not None and init.data_type == TensorProto.INT8:
                widest = max(widest, int(np.abs(numpy_helper.to_array(init).astype(np.int32)).max()))
    return widest


def seven_bit_weights(model: bytes) -> tuple[bytes, int]:
    """``model`` with every int8 weight of a ``MatMulIntegerToFloat`` wider than ``LIMIT`` halved and its
    scale doubled, and how many weights were rewritten (0: returned as is). A ``MatMulInteger`` with
    wide weights (its scale applied by a later ``Mul``) is an error: the export rewrites those first."""
    from onnx import TensorProto, numpy_helper

    proto = load(model)
    inits = {i.name: i for i in proto.graph.initializer}
    done: set[str] = set()
    for node in proto.graph.node:
        if node.op_type not in _INTEGER_PRODUCTS:
            continue
        weight_at, scale_at = _INTEGER_PRODUCTS[node.op_type]
        name = node.input[weight_at]
        init = inits.get(name)
        if init is None or init.data_type != TensorProto.INT8 or name in done:
            continue
        q = numpy_helper.to_array(init).astype(np.int32)
        if np.abs(q).max() <= LIMIT:
            continue
        if scale_at is None:
            raise ValueError(f"{node.name or name}: a MatMulInteger with full-range weights (rewrite it first)")
        scale_name = node.input[scale_at]
        if scale_name in done or scale_name not in inits:
            raise ValueError(f"{name}: its scale {scale_name!r} is shared or not a constant")
        zero = node.input[5] if len(node.input) > 5 else ""
        if zero and zero in inits and np.any(numpy_helper.to_array(inits[zero]) != 0):
            raise ValueError(f"{name}: not symmetric (a weight zero point other than 0)")
        halved = np.clip(np.rint(q / 2.0), -LIMIT, LIMIT).astype(np.int8)
        scale = numpy_helper.to_array(inits[scale_name]).astype(np.float32) * np.float32(2.0)
        init.CopyFrom(numpy_helper.from_array(halved, name))
        inits[scale_name].CopyFrom(numpy_helper.from_array(scale, scale_name))
        done |= {name, scale_name}
    if not done:
        return model, 0
    return proto.SerializeToString(), len(done) // 2

