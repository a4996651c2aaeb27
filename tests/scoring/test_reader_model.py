"""The shipped reader: the int8 file reproduces the trained model on the card's probe pairs, a
missing or corrupt file is a start-up error naming it, the verdict mapping, and a negated answer
read end to end by the local judge."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from ragmon.errors import ModelError
from ragmon.scoring import claim_verdicts as cv
from ragmon.scoring.local import LocalJudge
from ragmon.scoring.reader import model, verdicts, windows
from ragmon.scoring.reader.windows import Window

CARD = json.loads(resources.files("ragmon.scoring.reader").joinpath("assets/reader-card.json").read_text())


def test_the_shipped_file_is_the_one_the_card_and_the_code_name() -> None:
    reader = model.shared_reader()
    assert reader.sha256 == CARD["sha256"] == model.READER_SHA256
    assert model.bundled_path().stat().st_size <= 30 << 20


def test_the_card_says_where_its_int8_numbers_and_costs_were_measured() -> None:
    # int8 products differ a little with and without VNNI: a number without its CPU cannot be checked
    assert CARD["probes_read_on"].endswith("logical CPUs")
    assert CARD["cost"], "bench/judge_cost.py --card records the judge's cost with and without the reader"
    for entry in CARD["cost"]:
        assert entry["reader_sha256"] == CARD["sha256"]  # a cost of another file would be stale
        ratio = entry["ms_per_trace_with_reader"] / entry["ms_per_trace_without_reader"]
        assert entry["cpu"] and abs(entry["ratio"] - ratio) <= 0.01


def test_int8_reproduces_the_trained_models_probabilities_on_the_probe_pairs() -> None:
    reader = model.shared_reader()
    got = reader.read([(p["premise"], p["claim"]) for p in CARD["probes"]])
    fp32 = np.array([p["fp32"] for p in CARD["probes"]])
    int8 = np.array([p["int8"] for p in CARD["probes"]])
    assert np.abs(got - int8).max() < 0.02  # the export's own run (other CPUs round int8 differently)
    assert np.abs(got - fp32).max() < 0.08  # the trained torch model
    assert (got.argmax(axis=1) == fp32.argmax(axis=1)).mean() >= 0.75


def test_a_missing_or_corrupt_model_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"reader model file not found: .*nothing\.onnx"):
        model.Reader(tmp_path / "nothing.onnx")
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07not an onnx graph")
    with pytest.raises(ModelError, match=r"corrupt\.onnx"):
        model.Reader(corrupt, sha256=None)
    with pytest.raises(ModelError, match="checksum mismatch"):
        model.Reader(corrupt, sha256="0" * 64)


def _reading(sup: float, uns: float, con: float) -> verdicts.ClaimReading:
    return verdicts.ClaimReading((sup, uns, con), Window(("The tower is 330 m tall.",), "The tower is 330 m tall.", 1))


def test_the_verdict_mapping() -> None:
    claim = "The tower is 330 m tall."
    lexical = verdicts.verdict(claim, _reading(0.9, 0.05, 0.05), "number(s) not in contexts: 400", "evidence")
    assert (lexical.verdict, lexical.reason) == (cv.CONTRADICTED, "number(s) not in contexts: 400")
    contra = verdicts.verdict(claim, _reading(0.03, 0.02, 0.95), None, "")
    assert contra.verdict == cv.CONTRADICTED and contra.evidence == "The tower is 330 m tall."
    assert contra.reason == "reader: contradicted (p=0.95)"
    assert verdicts.verdict(claim, _reading(0.8, 0.1, 0.1), None, "").verdict == cv.SUPPORTED
    assert verdicts.verdict(claim, _reading(0.3, 0.45, 0.25), None, "").verdict == cv.UNSUPPORTED
    assert verdicts.verdict(claim, _reading(0.2, 0.1, 0.7), None, "").verdict == cv.UNSUPPORTED  # not sure enough
    # "contradicted" must beat "supported" as well as reach the threshold
    assert verdicts.verdict(claim, _reading(0.0, 0.0, 1.0), None, "").verdict == cv.CONTRADICTED
    features = verdicts.answer_features([_reading(0.9, 0.05, 0.05), _reading(0.2, 0.1, 0.7)])
    assert features == pytest.approx({"reader_min_support": 0.2, "reader_mean_support": 0.55,
                                      "reader_max_contradiction": 0.7, "reader_unsupported_share": 0.5})


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


CONTEXTS = [
    "Our support desk is open from Monday to Friday. Orders placed before noon are shipped the same day. "
    "Customers can return unused items within 30 days for a full refund.",
    "Gift cards are sent by email. The loyalty programme gives one point per euro spent.",
]


def test_a_negated_answer_gets_a_contradicted_verdict_with_its_evidence(judge: LocalJudge) -> None:
    faithful = judge.score_sync("Can I return items?", CONTEXTS,
                                "Customers can return unused items within 30 days for a full refund.")
    negated = judge.score_sync("Can I return items?", CONTEXTS,
                               "Customers cannot return unused items within 30 days for a full refund.")
    (verdict,) = negated.details[cv.DETAIL_KEY]
    assert verdict["verdict"] == cv.CONTRADICTED
    assert "return unused items within 30 days" in verdict["evidence"]
    assert faithful.details[cv.DETAIL_KEY][0]["verdict"] == cv.SUPPORTED
    assert negated.values["faithfulness"] < faithful.values["faithfulness"]
    assert judge.identity.version.endswith("+reader." + model.READER_SHA256[:12])


def test_the_reader_reads_only_claims_whose_verdict_it_can_change(judge: LocalJudge) -> None:
    filler, negated = "Sure, happy to help!", "Customers cannot return unused items within 30 days for a full refund."
    # read without the lexical checks' verdicts: the filler's window holds none of its words, so it is
    # not read; the restated negated claim is, and the reader alone calls it contradicted
    skipped, reading = judge._analyser.read([filler, negated], CONTEXTS)
    assert skipped is None
    assert reading is not None and reading.window.overlap >= verdicts.MIN_OVERLAP and reading.contradicted
    read_verdict = verdicts.verdict(negated, reading, None, "")
    assert read_verdict.verdict == cv.CONTRADICTED and read_verdict.reason.startswith("reader: contradicted")
    # a claim the lexical checks already decide is not read: their verdict stands
    assert judge._analyser.read([negated], CONTEXTS, decided=[True]) == [None]
    answer = f"{filler} {negated} Orders placed before noon are shipped within 5 days."
    analysis = judge.analyse("Can I return items?", CONTEXTS, answer)
    assert analysis.claims == [filler, negated, "Orders placed before noon are shipped within 5 days."]
    assert analysis.readings == (None, None, None)  # a filler, a flipped negation and a changed number
    details = judge.score_sync("Can I return items?", CONTEXTS, answer).details[cv.DETAIL_KEY]
    assert [v["verdict"] for v in details] == [cv.SUPPORTED, cv.CONTRADICTED, cv.CONTRADICTED]
    assert details[2]["reason"] == "number(s) not in contexts: 5"


def test_features_cover_only_the_claims_read() -> None:
    assert verdicts.answer_features([None, _reading(0.2, 0.1, 0.7), None]) == verdicts.answer_features(
        [_reading(0.2, 0.1, 0.7)])
    assert verdicts.answer_features([None])["reader_min_support"] == 1.0


def test_the_nan_guards_come_out_with_the_same_outputs() -> None:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from ragmon.scoring.reader.export import without_nan_guards

    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    nodes = [helper.make_node("Softmax", ["x"], ["p"]), helper.make_node("IsNaN", ["p"], ["nan"]),
             helper.make_node("Constant", [], ["z"], value=zero), helper.make_node("Where", ["nan", "z", "p"], ["g"]),
             helper.make_node("MatMul", ["g", "x"], ["y"])]
    graph = helper.make_graph(nodes, "guarded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])])
    guarded = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    lean, removed = without_nan_guards(guarded)
    assert removed == 1
    assert [n.op_type for n in onnx.load_from_string(lean).graph.node] == ["Softmax", "MatMul"]
    x = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    run = [ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0] for m in (guarded, lean)]
    assert np.array_equal(run[0], run[1])
    # the shipped file has none left
    assert without_nan_guards(model.bundled_path().read_bytes())[1] == 0


def test_a_verbatim_copy_is_not_a_contradiction() -> None:
    sentences = ["Customers can return unused items within 30 days for a full refund.",
                 "The shop did not say that prices will rise in May.", "Tickets cost $5 (children free)."]
    keys = [windows.copy_key(s) for s in sentences]
    # case, spacing, punctuation and quotes aside, the same tokens in the same order: a whole sentence or a part
    assert windows.copies("customers can return unused items within 30 days for a full refund", keys)
    assert windows.copies('"Tickets cost $5."', keys)
    assert windows.copies("Return  unused items within 30 days", keys)
    # any changed token is read: a negation, a number, a word, a symbol, a reordering
    for changed in ("Customers cannot return unused items within 30 days for a full refund.",
                    "Customers can return unused items within 60 days for a full refund.",
                    "Customers can return used items within 30 days for a full refund.",
                    "Tickets cost 5%.", "Within 30 days customers can return unused items."):
        assert not windows.copies(changed, keys), changed
    # a part cut from a sentence whose other words negate it does not say what the sentence says
    assert not windows.copies("Prices will rise in May.", keys)
    assert windows.copies("The shop did not say that prices will rise in May.", keys)
    assert not windows.copies("(…)!", keys)  # nothing left to copy


def test_a_claim_copied_verbatim_is_not_read_and_a_negated_copy_is(judge: LocalJudge) -> None:
    reader = judge._analyser.reader
    assert reader is not None
    copied = "Based on the passages, customers can return unused items within 30 days for a full refund [1]."
    negated = "Customers cannot return unused items within 30 days for a full refund."
    before = reader.pairs_read
    assert judge._analyser.read([copied, negated], CONTEXTS)[0] is None
    assert reader.pairs_read == before + 1  # the negated copy alone
    reading = judge._analyser.read([negated], CONTEXTS)[0]
    assert reading is not None and verdicts.verdict(negated, reading, None, "").verdict == cv.CONTRADICTED
    # end to end, the copy keeps the judge's own verdict: supported, citing the sentence it copies
    before = reader.pairs_read
    result = judge.score_sync("Can I return items?", CONTEXTS, copied)
    assert reader.pairs_read == before
    (verdict,) = result.details[cv.DETAIL_KEY]
    assert verdict["verdict"] == cv.SUPPORTED and "within 30 days" in verdict["evidence"]


def test_a_claims_probabilities_do_not_depend_on_the_claims_read_beside_it() -> None:
    reader = model.shared_reader()
    pairs = [(p["premise"], p["claim"]) for p in CARD["probes"]]
    pairs += [("The committee met on Tuesday. It did not approve the budget for the new library. " * 3,
               "The committee approved the library budget.")]
    together = reader.read(pairs)
    alone = np.vstack([reader.read([pair]) for pair in pairs])
    assert np.allclose(together, alone, atol=1e-5)


def _dynamic_int8_model(path: Path) -> bytes:
    """A two-product float model quantized as the export does (onnxruntime's dynamic int8)."""
    from onnx import TensorProto, helper, numpy_helper, save
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(1)
    w1, w2 = (numpy_helper.from_array(rng.normal(size=shape).astype(np.float32), name)
              for name, shape in (("w1", (8, 16)), ("w2", (16, 4))))
    bias = numpy_helper.from_array(rng.normal(size=16).astype(np.float32), "b1")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "t", 4])], [w1, w2, bias])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path / "fp32.onnx"))
    quantize_dynamic(str(path / "fp32.onnx"), str(path / "int8.onnx"), weight_type=QuantType.QInt8, per_channel=True)
    return (path / "int8.onnx").read_bytes()


def test_fixed_ranges_quantize_each_row_on_its_own(tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    from ragmon.scoring.reader.fixed_ranges import activation_ranges, quantized_inputs, with_fixed_ranges
    from ragmon.scoring.reader.seven_bit import seven_bit_weights

    dynamic = _dynamic_int8_model(tmp_path)
    assert len(quantized_inputs(dynamic)) == 2
    rng = np.random.default_rng(2)
    mask = np.ones((4, 6), np.int64)
    mask[:, 4:] = 0  # padding: its rows must not widen a range
    x_calibration = rng.normal(size=(4, 6, 8)).astype(np.float32)
    x_calibration[:, 4:] = 1e3
    calibration = [{"x": x_calibration, "attention_mask": mask}]
    ranges = activation_ranges(dynamic, calibration)
    first = quantized_inputs(dynamic)[0]
    assert ranges[first] == (float(x_calibration[:, :4].min()), float(x_calibration[:, :4].max()))
    fixed, rewritten = with_fixed_ranges(dynamic, ranges)
    assert rewritten == 2
    fixed, halved = seven_bit_weights(fixed)  # full-range weights clip in AVX2's int16 sums (seven_bit.py)
    assert halved == 2
    ops = [n.op_type for n in onnx.load_from_string(fixed).graph.node]
    assert "DynamicQuantizeLinear" not in ops and ops.count("MatMulIntegerToFloat") == 2
    run = ort.InferenceSession(fixed, providers=["CPUExecutionProvider"])
    x = rng.normal(size=(2, 6, 8)).astype(np.float32)
    one_row = run.run(["y"], {"x": x[:1]})[0]
    x_with_outlier = x.copy()
    x_with_outlier[1] *= 40.0  # in a dynamic model this row would widen the whole batch's range
    batched = run.run(["y"], {"x": x_with_outlier})[0]
    assert np.allclose(batched[0], one_row[0], atol=1e-6)
    reference = np.maximum(x[:1] @ _weights(dynamic, "w1") + _weights(dynamic, "b1"), 0) @ _weights(dynamic, "w2")
    assert np.abs(one_row - reference).max() < 0.1 * np.abs(reference).max()  # int8 close to float
    assert with_fixed_ranges(fixed, ranges) == (fixed, 0)
    with pytest.raises(ValueError, match="no fixed range"):
        with_fixed_ranges(dynamic, {})


def _weights(model_bytes: bytes, name: str) -> np.ndarray:
    """A float weight of the quantized model, dequantized back (per column scales)."""
    import onnx
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load_from_string(model_bytes).graph.initializer}
    if name in inits:
        return inits[name].astype(np.float32)
    return inits[name + "_quantized"].astype(np.float32) * inits[name + "_scale"]


def test_seven_bit_weights_halve_each_weight_and_double_its_scale(tmp_path: Path) -> None:
    import onnx
    from onnx import numpy_helper

    from ragmon.scoring.reader.fixed_ranges import activation_ranges, quantized_inputs, with_fixed_ranges
    from ragmon.scoring.reader.seven_bit import LIMIT, seven_bit_weights, widest_weight

    dynamic = _dynamic_int8_model(tmp_path)
    rng = np.random.default_rng(3)
    feed = {"x": rng.normal(size=(2, 5, 8)).astype(np.float32), "attention_mask": np.ones((2, 5), np.int64)}
    full, _ = with_fixed_ranges(dynamic, activation_ranges(dynamic, [feed]))
    assert widest_weight(full) == 127  # per-column symmetric int8: each column reaches 127
    seven, halved = seven_bit_weights(full)
    assert halved == len(quantized_inputs(dynamic)) == 2 and widest_weight(seven) == LIMIT
    before = {i.name: numpy_helper.to_array(i) for i in onnx.load_from_string(full).graph.initializer}
    after = {i.name: numpy_helper.to_array(i) for i in onnx.load_from_string(seven).graph.initializer}
    for node in onnx.load_from_string(seven).graph.node:
        if node.op_type == "MatMulIntegerToFloat":
            weight, scale = node.input[1], node.input[3]
            assert np.array_equal(after[weight], np.rint(before[weight] / 2.0).astype(np.int8))
            assert np.allclose(after[scale], 2.0 * before[scale])
            # the dequantized weight moves by at most half of its new step
            moved = np.abs(after[weight] * after[scale] - before[weight] * before[scale])
            assert (moved <= after[scale] / 2 + 1e-7).all()
    assert seven_bit_weights(seven) == (seven, 0)  # already 7 bits: returned as is


def test_the_shipped_reader_holds_its_weights_to_seven_bits() -> None:
    from ragmon.scoring.reader.seven_bit import LIMIT, widest_weight

    assert 0 < widest_weight(model.bundled_path().read_bytes()) <= LIMIT
