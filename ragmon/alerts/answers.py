"""promtool's answers kept on disk under what was asked, so a simulation stopped midway resumes.

A chunk's promtool test is a pure function of its rules file, its input series and promtool's version:
the same question always gets the same answer. A fleet's stationary cell runs for hours, chunk by chunk;
with each chunk's answer kept under the sha256 of its question, a run stopped at the end of a working
session (or killed) skips the chunks it had finished when it is started again with the same arguments.
A kept answer is checked like a fresh one; one that cannot be read is asked again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path


@functools.lru_cache(maxsize=4)
def promtool_version(path: str) -> str:
    """The first line of ``promtool --version``: a new promtool may evaluate differently."""
    proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False)
    return (proc.stdout + proc.stderr).strip().splitlines()[0] if proc.returncode == 0 else f"unknown {path}"


class PromtoolAnswers:
    """A folder of promtool outputs by question; counts what it was asked and what it could answer."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.asked = 0
        self.reused = 0
        self._lock = threading.Lock()  # chunks are asked from several threads

    @staticmethod
    def key(version: str, rules_text: str, test_text: str) -> str:
        digest = hashlib.sha256()
        for part in (version, rules_text, test_text):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
        return digest.hexdigest()

    def get(self, key: str, accept: Callable[[str], bool]) -> str | None:
        """The answer kept under ``key`` if there is one that ``accept`` takes (a whole promtool report)."""
        with self._lock:
            self.asked += 1
        try:
            text = (self.directory / f"{key}.txt").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if not accept(text):
            return None
        with self._lock:
            self.reused += 1
        return text

    def put(self, key: str, output: str) -> None:
        # written beside and renamed: a run killed while writing leaves no half answer under the key
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".answer-", dir=self.directory)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(output)
        os.replace(tmp, self.directory / f"{key}.txt")
