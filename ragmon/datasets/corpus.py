"""A corpus for the golden-set tools: a directory of ``.txt``/``.md`` files, or JSONL rows.

* **Directory**: every ``*.txt`` and ``*.md`` below it (sorted, recursive). A document's id is its
  path relative to the directory (POSIX slashes, suffix kept: ``guides/refunds.md``); its title is
  the first Markdown ``# heading`` of a ``.md`` file, else the file name without its suffix.
* **JSONL** (``.jsonl``, ``.jsonl.gz``, or anything else that is a file): one object a line,
  ``{"id", "title", "text"}``; ``_id`` is accepted for ``id`` (BEIR corpora), ``title`` may be
  missing. Blank lines are skipped; a bad line stops the load with its line number (a corpus is
  hand-made or exported once, a silently missing document would bias every number after it).

Ids are unique: a second document with an id already seen is an error.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from ..errors import EvalInputError

__all__ = ["CorpusDoc", "load_corpus", "parse_corpus_lines"]

TEXT_SUFFIXES = (".txt", ".md")
_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    """One document: a stable id, a title (may be empty) and its text."""

    id: str
    title: str
    text: str


def load_corpus(path: str | PathLike[str]) -> list[CorpusDoc]:
    """The documents of a directory or a JSONL file. Raises ``EvalInputError``."""
    root = Path(path)
    if root.is_dir():
        docs = list(_directory(root))
    elif root.is_file():
        docs = list(parse_corpus_lines(_lines(root), path=str(root)))
    else:
        raise EvalInputError(f"corpus {str(root)!r}: no such file or directory")
    if not docs:
        raise EvalInputError(f"corpus {str(root)!r} holds no document")
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise EvalInputError(f"corpus {str(root)!r}: document id {doc.id!r} appears twice")
        seen.add(doc.id)
    return docs


def parse_corpus_lines(lines: Iterable[str], *, path: str = "") -> Iterator[CorpusDoc]:
    """JSONL rows -> documents (pure). Raises ``EvalInputError`` naming the bad line."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"corpus {path!r} line {number}"
        try:
            row = json.loads(line.removeprefix("\ufeff"))
        except ValueError as exc:
            raise EvalInputError(f"{where}: not valid JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise EvalInputError(f"{where}: expected a JSON object")
        raw_id = row.get("id", row.get("_id"))
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
            raise EvalInputError(f"{where}: 'id' must be a non-empty string or an integer")
        text, title = row.get("text"), row.get("title") or ""
        if not isinstance(text, str) or not isinstance(title, str):
            raise EvalInputError(f"{where}: 'text' (and 'title' when given) must be strings")
        yield CorpusDoc(str(raw_id).strip(), title.strip(), text)


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            yield from fh
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalInputError(f"cannot read corpus {str(path)!r}: {exc}") from exc


def _directory(root: Path) -> Iterator[CorpusDoc]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalInputError(f"cannot read corpus file {str(file)!r}: {exc}") from exc
        heading = _HEADING.search(text) if file.suffix.lower() == ".md" else None
        title = heading.group(1) if heading else file.stem.replace("_", " ").replace("-", " ")
        yield CorpusDoc(file.relative_to(root).as_posix(), title, text)
