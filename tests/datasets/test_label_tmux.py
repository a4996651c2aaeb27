"""``ragmon dataset label`` driven in a real terminal: tmux runs the command, the test types with
``send-keys`` and reads the screen with ``capture-pane``; the labeller quits half-way and resumes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragmon.evaluation.goldenset import load_golden_set

from .conftest import write_jsonl

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make services)")
REPO = Path(__file__).resolve().parents[2]


class Terminal:
    def __init__(self, socket: str, name: str) -> None:
        self.socket, self.name = socket, name

    def tmux(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10,
                              check=False)
        return proc.stdout

    def start(self, command: str) -> None:
        env = f"PYTHONPATH={REPO} "
        self.tmux("new-session", "-d", "-s", self.name, "-x", "220", "-y", "60",
                  f"cd {REPO} && {env}{command}; echo '<<exited>>'; sleep 60")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name, "-S", "-200")

    def wait_for(self, text: str, timeout: float = 30.0, count: int = 1) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} (x{count}) never appeared; the screen:\n{self.screen()}")

    def type(self, keys: str) -> None:
        if keys:
            self.tmux("send-keys", "-t", self.name, "-l", keys)
        self.tmux("send-keys", "-t", self.name, "Enter")

    def kill(self) -> None:
        self.tmux("kill-session", "-t", self.name)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    socket = f"ragmon-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    term = Terminal(socket, "label")
    yield term
    term.kill()
    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10, check=False)


def _candidate(n: int) -> dict:
    return {"id": f"prod-{n}", "question": f"How long do refunds take, case {n}?",
            "ground_truth_docs": [f"kb-{n}", f"kb-{n + 10}", f"kb-{n + 20}"],
            "meta": {"source": "production", "label_status": "unlabelled", "pipeline": "support",
                     "verdict": "retrieval_failure", "score_band": "low", "trace_id": f"{n:032x}",
                     "answer": f"Refunds take {n} days.",
                     "contexts": [{"id": f"kb-{n + 10 * i}", "content": f"Policy text {i} for case {n}.",
                                   "score": 0.9 - i / 10} for i in range(3)]}}


def test_label_stop_and_resume_in_a_real_terminal(terminal: Terminal, tmp_path: Path) -> None:
    candidates = write_jsonl(tmp_path / "candidates.jsonl", [_candidate(1), _candidate(2), _candidate(3)])
    golden = tmp_path / "golden.jsonl"
    command = f"{sys.executable} -m ragmon dataset label {candidates} --out {golden}"

    terminal.start(command)
    screen = terminal.wait_for("gold documents")
    assert "Question: How long do refunds take, case 1?" in screen
    assert "[3] kb-21  Policy text 2 for case 1." in screen and "Answer given: Refunds take 1 days." in screen
    terminal.type("1,3")
    terminal.wait_for("reference answer")
    terminal.type("")  # accept the answer given
    terminal.wait_for("type (")
    terminal.type("x")  # not a choice: asked again
    terminal.wait_for("not one of the choices")
    terminal.type("f")
    terminal.wait_for("difficulty (")
    terminal.type("h")
    terminal.wait_for("saved prod-1 (2 gold document(s))")
    terminal.wait_for("case 2?")
    terminal.type("q")
    screen = terminal.wait_for("<<exited>>")
    assert "stopped: 1 labelled, 0 skipped, 2 left; run the same command to resume." in screen

    rows = load_golden_set(golden).rows
    assert len(rows) == 1
    row = rows[0]
    assert (row.id, dict(row.ground_truth_docs), row.ground_truth_answer) == ("prod-1", {"kb-1": 1, "kb-21": 1},
                                                                            "Refunds take 1 days.")
    assert (row.question_type, row.difficulty, row.meta["label_status"]) == ("factoid", "hard", "labelled")
    assert "contexts" not in row.meta and row.meta["verdict"] == "retrieval_failure"

    terminal.kill()
    terminal.start(command)  # resume
    screen = terminal.wait_for("gold documents")
    assert "3 candidate(s), 2 to label, 1 already done" in screen and "case 2?" in screen
    terminal.type("s")
    terminal.wait_for("skipped prod-2")
    terminal.wait_for("case 3?")
    terminal.type("0")  # none of the documents: a no-answer question
    terminal.wait_for("reference answer")
    terminal.type("-")
    terminal.wait_for("type (")
    terminal.type("")  # no gold documents: the default type is no_answer
    terminal.wait_for("difficulty (")
    terminal.type("")
    screen = terminal.wait_for("<<exited>>")
    assert "done: 1 labelled, 1 skipped." in screen

    rows = load_golden_set(golden).rows
    assert [r.id for r in rows] == ["prod-1", "prod-3"]
    last = rows[1]
    assert (dict(last.ground_truth_docs), last.ground_truth_answer, last.question_type, last.difficulty) == \
        ({}, None, "no_answer", None)
    state = json.loads((tmp_path / "golden.jsonl.label-state.json").read_text())
    assert state["decided"] == {"prod-1": "labelled", "prod-2": "skipped", "prod-3": "labelled"}


def _judged(n: int, faithfulness: float) -> dict:
    row = _candidate(n)
    row["meta"]["scores"] = {"faithfulness": faithfulness, "answer_relevancy": 0.9, "context_precision": 0.9}
    return row


def test_judge_mode_in_a_real_terminal(terminal: Terminal, tmp_path: Path) -> None:
    """--mode judge: faithful? answers? relevant contexts? -> the calibration format; the trace nearest
    the threshold is offered first; no scores on screen; quit and resume."""
    candidates = write_jsonl(tmp_path / "candidates.jsonl", [_judged(1, 0.97), _judged(2, 0.52), _judged(3, 0.1)])
    labels = tmp_path / "labels.jsonl"
    command = f"{sys.executable} -m ragmon dataset label {candidates} --mode judge --out {labels}"

    terminal.start(command)
    screen = terminal.wait_for("faithful?", timeout=90)  # the interpreter's start on a loaded machine
    assert "case 2?" in screen and "0.52" not in screen  # nearest the threshold first; scores not shown
    assert "[2] kb-12  Policy text 1 for case 2." in screen
    terminal.type("maybe")
    terminal.wait_for("y, n or ?; try again")
    terminal.type("n")
    terminal.wait_for("answers the question?")
    terminal.type("y")
    terminal.wait_for("relevant contexts")
    terminal.type("1,3")
    terminal.wait_for("saved prod-2 (faithful no, answers yes, relevant contexts 2/3)")
    terminal.wait_for("faithful?", count=2)
    terminal.type("q")
    screen = terminal.wait_for("<<exited>>")
    assert "stopped: 1 labelled, 0 skipped, 2 left" in screen

    # resume in a second session opened before the first is closed: the tmux server never runs empty
    # (an empty server exits, and a session started during its exit can be lost)
    first_session, terminal.name = terminal.name, "label-resumed"
    terminal.start(command)
    terminal.tmux("kill-session", "-t", first_session)
    screen = terminal.wait_for("faithful?", timeout=90)  # the interpreter's start on a loaded machine
    assert "3 candidate(s), 2 to label, 1 already done" in screen
    terminal.type("?")
    terminal.wait_for("answers the question?")
    terminal.type("y")
    terminal.wait_for("relevant contexts")
    terminal.type("0")
    terminal.wait_for("faithful?", count=2)
    terminal.type("s")
    screen = terminal.wait_for("<<exited>>")
    assert "done: 1 labelled, 1 skipped." in screen

    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["prod-2", rows[1]["id"]] and rows[1]["id"] in ("prod-1", "prod-3")
    assert rows[0]["labels"] == {"faithful": 0, "answer_relevant": 1, "context_relevant": 1}
    assert rows[0]["meta"]["context_labels"] == [1, 0, 1] and rows[0]["answer"] == "Refunds take 2 days."
    assert rows[0]["contexts"] == [f"Policy text {i} for case 2." for i in range(3)]
    assert rows[1]["labels"] == {"faithful": None, "answer_relevant": 1, "context_relevant": 0}
    assert rows[1]["meta"]["context_labels"] == [0, 0, 0]
