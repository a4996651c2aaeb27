"""The golden-set loader: valid rows load, each bad line is a problem with its line number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragmon.errors import RagmonError
from ragmon.evaluation.goldenset import EvalInputError, load_golden_set, parse_golden_lines
from ragmon.evaluation.types import PROBLEM_DUPLICATE_ID, PROBLEM_MALFORMED_ROW


def line(**row: Any) -> str:
    return json.dumps(row)


def test_full_row_loads_every_field(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text(line(id="q1", question="Who wrote it?", ground_truth_answer="Ann.",
                         ground_truth_docs={"d1": 3, "d2": 0, "d3": 1}, question_type="multi_hop",
                         difficulty="hard", hops=[["d1"], ["d3", "d4"]], meta={"topic": "books"}) + "\n")
    golden = load_golden_set(path)
    assert golden.problems == ()
    assert golden.path == str(path)
    (row,) = golden.rows
    assert row.id == "q1"
    assert row.question == "Who wrote it?"
    assert row.ground_truth_answer == "Ann."
    assert dict(row.ground_truth_docs) == {"d1": 3, "d2": 0, "d3": 1}
    assert row.relevant_ids == {"d1", "d3"}
    assert row.question_type == "multi_hop"
    assert row.difficulty == "hard"
    assert row.hops == (frozenset({"d1"}), frozenset({"d3", "d4"}))
    assert row.meta == {"topic": "books"}
    assert row.line == 1


def test_defaults_and_conversions() -> None:
    golden = parse_golden_lines([
        line(id=7, question="q", ground_truth_docs=["a", 2, "a"]),
        line(id="h", question="two hops", question_type="multi_hop", hops=[["x", "y"], "z"]),
        line(id="n", question="unanswerable", question_type="no_answer", ground_truth_answer="  ",
             difficulty=None, meta=None),
        line(id="g", question="float grades", ground_truth_docs={"a": 2.0}),
    ])
    assert golden.problems == ()
    plain, hops, no_answer, floats = golden.rows
    assert plain.id == "7"
    assert plain.question_type == "factoid"  # the default
    assert dict(plain.ground_truth_docs) == {"a": 1, "2": 1}  # a list means grade 1 each
    assert hops.hops == (frozenset({"x", "y"}), frozenset({"z"}))
    assert dict(hops.ground_truth_docs) == {"x": 1, "y": 1, "z": 1}  # derived from the hops
    assert no_answer.ground_truth_docs == {} and no_answer.ground_truth_answer is None
    assert no_answer.difficulty is None and no_answer.meta == {}
    assert dict(floats.ground_truth_docs) == {"a": 2}


def test_multi_hop_row_without_hops_is_kept() -> None:
    golden = parse_golden_lines([line(id="m", question="q", question_type="multi_hop", ground_truth_docs=["a"])])
    assert golden.problems == () and golden.rows[0].hops == ()


BAD_ROWS = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    (line(question="no id"), "'id' must be a string or an integer"),
    (line(id=True, question="q"), "'id' must be a string or an integer"),
    (line(id="  ", question="q"), "'id' must be a non-empty string"),
    (line(id="e", question="   "), "'question' must be a non-empty string"),
    (line(id="e", question=3), "'question' must be a non-empty string"),
    (line(id="e", question="q", question_type="essay"), "'question_type' must be one of factoid, summary"),
    (line(id="e", question="q", difficulty="brutal"), "'difficulty' must be one of easy, medium, hard"),
    (line(id="e", question="q", ground_truth_docs={"a": 4}), "grade 4 out of range 0-3"),
    (line(id="e", question="q", ground_truth_docs={"a": -1}), "grade -1 out of range 0-3"),
    (line(id="e", question="q", ground_truth_docs={"a": 1.5}), "grade must be an integer 0-3"),
    (line(id="e", question="q", ground_truth_docs={"a": True}), "grade must be an integer 0-3"),
    (line(id="e", question="q", ground_truth_docs="a"), "'ground_truth_docs' must be a list of ids"),
    (line(id="e", question="q", ground_truth_docs=[None]), "'ground_truth_docs[0]' must be"),
    (line(id="e", question="q", ground_truth_answer=["x"]), "'ground_truth_answer' must be a string"),
    (line(id="e", question="q", hops="a"), "'hops' must be a list"),
    (line(id="e", question="q", hops=[["a"], []]), "hops[1] is empty"),
    (line(id="e", question="q", meta=[1]), "'meta' must be an object"),
]


@pytest.mark.parametrize(("text", "message"), BAD_ROWS, ids=[m for _, m in BAD_ROWS])
def test_malformed_row_is_a_problem_with_line_number_and_rest_loads(text: str, message: str) -> None:
    lines = [line(id="ok1", question="first"), "", text, line(id="ok2", question="last")]
    golden = parse_golden_lines(lines)
    assert [r.id for r in golden.rows] == ["ok1", "ok2"]
    assert [r.line for r in golden.rows] == [1, 4]
    (problem,) = golden.problems
    assert problem.reason == PROBLEM_MALFORMED_ROW
    assert problem.line == 3
    assert problem.source == "evalset"
    assert message in problem.message


def test_bad_row_keeps_its_id_for_the_report() -> None:
    (problem,) = parse_golden_lines([line(id="q9", question="")]).problems
    assert problem.row_id == "q9"


def test_duplicate_id_first_row_wins() -> None:
    golden = parse_golden_lines([line(id="a", question="one"), line(id="b", question="two"),
                                 line(id="a", question="again")])
    assert [(r.id, r.question) for r in golden.rows] == [("a", "one"), ("b", "two")]
    (problem,) = golden.problems
    assert (problem.reason, problem.line, problem.row_id) == (PROBLEM_DUPLICATE_ID, 3, "a")
    assert "line 1" in problem.message


def test_unknown_keys_are_kept_in_meta_and_warned_about() -> None:
    golden = parse_golden_lines([
        line(id="a", question="q", ground_truth_doc=["x"], source="faq", meta={"source": "explicit"}),
        line(id="b", question="q", ground_truth_doc=["y"]),
    ])
    assert golden.rows[0].meta == {"ground_truth_doc": ["x"], "source": "explicit"}  # explicit meta wins
    assert golden.rows[0].ground_truth_docs == {}
    assert golden.warnings == (
        "unknown key 'ground_truth_doc' on 2 row(s), kept in meta; did you mean 'ground_truth_docs'?",
        "unknown key 'source' on 1 row(s), kept in meta",
    )


def test_bytes_lines_bom_blank_lines_and_bad_utf8(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + line(id="a", question="caf\u00e9").encode() + b"\r\n\n   \n"
                     + b'{"id": "b", "question": "\xff"}\n' + line(id="c", question="q").encode())
    golden = load_golden_set(path)
    assert [r.id for r in golden.rows] == ["a", "c"]
    assert golden.rows[0].question == "caf\u00e9"
    assert golden.rows[1].line == 5
    (problem,) = golden.problems
    assert problem.line == 4 and "not valid UTF-8" in problem.message


def test_unreadable_file_raises_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(EvalInputError, match=r"cannot read eval set .*nope\.jsonl"):
        load_golden_set(missing)
    with pytest.raises(RagmonError):
        load_golden_set(tmp_path)  # a directory
