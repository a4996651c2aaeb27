"""``ragmon calibrate`` on a small labelled file written here (with malformed lines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmon.calibration import stats
from ragmon.cli import main

PARIS = [
    "The Eiffel Tower is 330 metres tall and was completed in 1889.",
    "The tower is open to visitors every day of the year, and tickets can be bought online.",
]
BANK = [
    "Savings accounts at Northwind Bank pay 2.5% interest per year, credited monthly.",
    "Customers can open a savings account online with a minimum deposit of 100 dollars.",
]


def _row(i: int, question: str, contexts: list[str], answer: str, faithful: int) -> dict:
    return {
        "id": f"r{i}", "dataset": "test", "task": "qa", "question": question, "contexts": contexts,
        "answer": answer, "labels": {"faithful": faithful, "answer_relevant": None, "context_relevant": None},
        "meta": {"note": "extra fields are ignored"}, "extra": 1,
    }


GOOD_ROWS = [
    _row(1, "How tall is the Eiffel Tower?", PARIS, "The Eiffel Tower is 330 metres tall.", 1),
    _row(2, "How tall is the Eiffel Tower?", PARIS, "The Eiffel Tower is 450 metres tall.", 0),
    _row(3, "Is the tower open every day?", PARIS, "The tower is open to visitors every day of the year.", 1),
    _row(4, "Is the tower open every day?", PARIS, "The tower is not open to visitors every day of the year.", 0),
    _row(5, "What interest does Northwind pay?", BANK, "Northwind savings accounts pay 2.5% interest per year.", 1),
    _row(6, "What interest does Northwind pay?", BANK, "Northwind savings accounts pay 7% interest per year.", 0),
    {
        "id": "ranked", "question": "What is the minimum deposit for a savings account?",
        "contexts": [PARIS[0], BANK[1], PARIS[1]], "answer": None,
        "labels": {"faithful": None, "answer_relevant": None, "context_relevant": 1},
        "meta": {"context_labels": [0, 1, 0]},
    },
]
MALFORMED = [
    "{not json",
    json.dumps({"question": "q", "contexts": "one string", "answer": "a", "labels": {"faithful": 1}}),
    json.dumps({"question": "q", "contexts": ["c"], "answer": "a", "labels": {"faithful": 2}}),
    json.dumps({"question": "q", "contexts": ["c", "d"], "answer": None, "labels": {},
                "meta": {"context_labels": [1]}}),
    json.dumps({"question": "q", "contexts": ["c"], "answer": "a", "labels": {"faithful": None}}),
    json.dumps([1, 2, 3]),
]


@pytest.fixture()
def labelled_file(tmp_path: Path) -> Path:
    lines = [json.dumps(GOOD_ROWS[0]), MALFORMED[0], json.dumps(GOOD_ROWS[1]), "", MALFORMED[1]]
    lines += [json.dumps(r) for r in GOOD_ROWS[2:]] + MALFORMED[2:]
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_calibrate_local_report(labelled_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    rc = main(["calibrate", str(labelled_file), "--judge", "local", "--out", str(out), "--bootstrap", "50",
               "--seed", "7", "--judge-concurrency", "2"])
    assert rc == 0
    captured = capsys.readouterr()
    report = json.loads(out.read_text())

    # malformed lines: reported with line numbers and what is wrong, the rest still scored
    assert report["rows_malformed"] == 6
    by_line = {e["line"]: e["error"] for e in report["malformed"]}
    assert sorted(by_line) == [2, 5, 11, 12, 13, 14]
    assert "not valid JSON" in by_line[2]
    assert "'contexts' must be a list" in by_line[5]
    assert "labels.faithful must be 1, 0 or null" in by_line[11]
    assert "1 labels for 2 contexts" in by_line[12]
    assert "no label" in by_line[13]
    assert "expected a JSON object" in by_line[14]
    assert "line 2: not valid JSON" in captured.err
    assert report["rows_scored"] == 7 and report["rows_failed"] == 0

    faith = report["metrics"]["faithfulness"]
    assert faith["n"] == 6 and faith["n_failure"] == 3
    # the report's numbers are the stats of the per-row scores it lists
    rows = [r for r in report["rows"] if r["labels"]["faithful"] is not None]
    labels = [r["labels"]["faithful"] for r in rows]
    scores = [r["scores"]["faithfulness"] for r in rows]
    assert faith["roc_auc"]["value"] == pytest.approx(stats.roc_auc(labels, scores), abs=1e-4)
    c = stats.confusion(labels, scores, 0.5)
    assert faith["confusion"] == {"tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn}
    assert faith["cohen_kappa"]["value"] == pytest.approx(stats.cohen_kappa(c), abs=1e-4)
    # the local judge separates these contradictions from the faithful answers
    assert faith["roc_auc"]["value"] == 1.0
    assert faith["balanced_accuracy"]["value"] == 1.0
    lo, hi = faith["balanced_accuracy"]["ci95"]
    assert lo <= 1.0 and hi == 1.0
    assert "Youden" in faith["best_threshold"]["rule"]
    for key in ("precision_failure", "recall_failure", "f1_failure"):
        assert set(faith[key]) == {"value", "ci95"}

    ranking = report["context_ranking"]
    assert ranking["queries"] == 1 and ranking["k"] == 5
    assert ranking["map"]["value"] == 1.0 and ranking["mrr"]["value"] == 1.0
    assert ranking["map"]["given_order"] == 0.5  # the relevant context came second
    assert report["metrics"]["context_precision"]["n_failure"] == 0

    # terminal table
    assert "faithfulness" in captured.out and "MAP" in captured.out and "bal. accuracy" in captured.out


def test_calibrate_limit_and_missing_file(labelled_file: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main(["calibrate", str(labelled_file), "--limit", "2", "--out", str(out), "--bootstrap", "0",
                 "--no-progress"]) == 0
    report = json.loads(out.read_text())
    assert report["rows_scored"] == 2
    assert report["metrics"]["faithfulness"]["roc_auc"]["ci95"] == [None, None]
    assert main(["calibrate", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_calibrate_only_malformed_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(MALFORMED) + "\n", encoding="utf-8")
    assert main(["calibrate", str(path)]) == 1
    assert "no usable labelled row" in capsys.readouterr().err


def test_calibrate_llm_needs_endpoint(labelled_file: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGMON_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("RAGMON_JUDGE_MODEL", raising=False)
    assert main(["calibrate", str(labelled_file), "--judge", "llm"]) == 2
    assert "--judge-base-url" in capsys.readouterr().err


async def test_calibrate_llm_judge_over_real_http(labelled_file: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``--judge llm`` against the OpenAI-protocol test server: every row is judged over HTTP, a
    row whose reply stays invalid after the repair attempt is counted as failed, the rest reported."""
    import asyncio

    from tests.fakes.openai_server import FakeOpenAI, Reply, fenced_payload

    monkeypatch.delenv("RAGMON_JUDGE_API_KEY", raising=False)
    out = tmp_path / "llm.json"
    async with FakeOpenAI() as server:
        # the first row's compact call and its one repair attempt both get prose, not JSON
        server.enqueue(Reply.text("It looks faithful to me."), Reply.text("Still not JSON, sorry."))
        rc = await asyncio.to_thread(
            main, ["calibrate", str(labelled_file), "--judge", "llm", "--judge-base-url", server.base_url,
                   "--judge-model", "judge-model", "--out", str(out), "--bootstrap", "20", "--judge-concurrency", "1",
                   "--no-progress"],
        )
        chats = server.chat_requests
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["judge"] == "llm"
    assert report["rows_failed"] == 1 and report["rows_scored"] == 6
    assert "invalid_reply" in json.dumps(report["failed"])
    # 7 rows, one of them repaired once: 8 chat calls, each carrying one fenced row
    assert len(chats) == 8
    questions = {fenced_payload(c.body)["question"] for c in chats}
    assert questions == {r["question"] for r in GOOD_ROWS}
    assert all(c.body["model"] == "judge-model" for c in chats)
    faith = report["metrics"]["faithfulness"]
    assert faith["n"] == 5  # the failed row is not in the statistics
    scored = [r for r in report["rows"] if r["labels"]["faithful"] is not None]
    assert all(0.0 <= r["scores"]["faithfulness"] <= 1.0 for r in scored)
