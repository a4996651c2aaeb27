"""Where the benches' labelled data lives, and what to say when it is not there.

The data (human-labelled dev sets, retrieval corpora) is never committed: the texts carry their own
licences. ``bench/data/benchdata_manifest.json`` names every file, the public source it comes from
(URL pinned to a commit where it is a GitHub file), its sha256 and licence, and the derivation that
turns the source into the file ragmon reads. ``make benchdata`` (``scripts/benchdata.py``) fetches
and derives the files into ``.cache/benchdata``, or checks a local copy named by ``RAGMON_BENCHDATA``.

Every bench and test that reads the data asks this module for it:

* :func:`benchdata_dir` — ``$RAGMON_BENCHDATA`` when set, else ``.cache/benchdata`` in this clone;
* :func:`benchdata_file` / :func:`require` — the path(s), or :class:`MissingBenchdata`, whose message
  names the files that are missing and the command that fetches them;
* :func:`missing` — the same check without raising (tests skip on it);
* :func:`load_manifest` / :func:`verify` — the manifest and the sha256 check (a mismatch is an
  error naming the file), shared with ``scripts/benchdata.py``.

Standard library only, so ``make benchdata`` runs before any virtual environment exists.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "bench" / "data" / "benchdata_manifest.json"
CACHE = ROOT / ".cache" / "benchdata"
ENV = "RAGMON_BENCHDATA"
COMMAND = "make benchdata"


class BenchdataError(SystemExit):
    """Bench data that cannot be used: missing, or not the bytes the manifest names. A SystemExit, so
    a bench stops with the message alone (no traceback); code and tests catch it by this class."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class MissingBenchdata(BenchdataError):
    """Files a bench needs are not in the bench data folder."""


class ChecksumMismatch(BenchdataError):
    """A file's sha256 differs from the manifest's."""


@dataclass(frozen=True)
class Entry:
    """One file of the manifest (paths are relative to the bench data folder, with ``/``)."""

    path: str
    sha256: str
    bytes: int
    licence: str
    source: dict[str, Any]
    derive: dict[str, Any] | None = None
    check: str = "local-only"  # "reproduced": rebuilt byte for byte from the public source
    note: str = ""


@dataclass(frozen=True)
class Manifest:
    about: str
    entries: tuple[Entry, ...]

    def entry(self, path: str) -> Entry:
        for e in self.entries:
            if e.path == path:
                return e
        raise KeyError(path)


def load_manifest(path: Path = MANIFEST) -> Manifest:
    """Read and check the manifest: every file has a relative path inside the folder, a sha256 of 64
    hex digits, a size, a licence and a source URL; no path twice."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    entries: list[Entry] = []
    for i, item in enumerate(raw.get("files", [])):
        where = f"{path.name}: files[{i}]"
        for key in ("path", "sha256", "bytes", "licence", "source"):
            if key not in item:
                raise ValueError(f"{where} has no {key!r}")
        rel = PurePosixPath(item["path"])
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"{where}: path {item['path']!r} is not a plain relative path")
        digest = str(item["sha256"])
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"{where} ({item['path']}): sha256 is not 64 lower-case hex digits")
        if not isinstance(item["source"], dict) or not item["source"].get("url"):
            raise ValueError(f"{where} ({item['path']}): source has no url")
        if item.get("check", "local-only") not in ("reproduced", "local-only"):
            raise ValueError(f"{where} ({item['path']}): check is 'reproduced' or 'local-only'")
        entries.append(Entry(path=str(rel), sha256=digest, bytes=int(item["bytes"]), licence=str(item["licence"]),
                             source=dict(item["source"]), derive=item.get("derive"),
                             check=item.get("check", "local-only"), note=item.get("note", "")))
    paths = [e.path for e in entries]
    if len(set(paths)) != len(paths):
        raise ValueError(f"{path.name}: a path is listed twice")
    if not entries:
        raise ValueError(f"{path.name}: no files")
    return Manifest(about=str(raw.get("about", "")), entries=tuple(entries))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def benchdata_dir() -> Path:
    """``$RAGMON_BENCHDATA`` when set (a local copy), else ``.cache/benchdata`` in this clone."""
    env = os.environ.get(ENV)
    return Path(env).expanduser() if env else CACHE


def _how_to_get() -> str:
    if os.environ.get(ENV):
        return (f"{ENV} points at {benchdata_dir()}; fix that copy, or unset {ENV} and run `{COMMAND}` "
                "to fetch the files from their public sources")
    return (f"run `{COMMAND}` to fetch them from their public sources (bench/data/benchdata_manifest.json), "
            f"or set {ENV}=/path/to/a/copy")


def missing(names: Iterable[str], directory: Path | None = None) -> list[str]:
    """The names (relative paths) that are not files in the bench data folder."""
    folder = directory if directory is not None else benchdata_dir()
    return [n for n in names if not (folder / n).is_file()]


def missing_reason(names: Iterable[str], directory: Path | None = None) -> str:
    """One line for a test's skip reason: what is missing and how to get it."""
    folder = directory if directory is not None else benchdata_dir()
    absent = missing(names, folder)
    return f"needs bench data {', '.join(absent)} in {folder}: {_how_to_get()}"


def require(*names: str, directory: Path | None = None) -> Path:
    """The bench data folder, after checking that every name is a file in it; otherwise
    :class:`MissingBenchdata` listing each missing file and the command that fetches it."""
    folder = directory if directory is not None else benchdata_dir()
    absent = missing(names, folder)
    if absent:
        listed = "\n".join(f"  {folder / n}" for n in absent)
        raise MissingBenchdata(f"this bench needs labelled data that is not there:\n{listed}\n{_how_to_get()}")
    return folder


def benchdata_file(name: str, directory: Path | None = None) -> Path:
    """The path of one bench data file (``retrieval/wice_claim_dev.jsonl``), checked to exist."""
    return require(name, directory=directory) / name


def verify(directory: Path, manifest: Manifest | None = None, paths: Iterable[str] | None = None) -> list[str]:
    """Check the manifest's files in ``directory`` by sha256; returns the paths checked.
    Missing files raise :class:`MissingBenchdata` (all of them named), a file with other bytes
    :class:`ChecksumMismatch` naming it. Files the manifest does not list are ignored."""
    m = manifest or load_manifest()
    wanted = set(paths) if paths is not None else None
    entries = [e for e in m.entries if wanted is None or e.path in wanted]
    if wanted is not None and len(entries) != len(wanted):
        unknown = sorted(wanted - {e.path for e in entries})
        raise ValueError(f"not in the manifest: {unknown}")
    absent = missing((e.path for e in entries), directory)
    if absent:
        listed = "\n".join(f"  {directory / n}" for n in absent)
        raise MissingBenchdata(f"bench data missing in {directory}:\n{listed}\n{_how_to_get()}")
    bad = []
    for e in entries:
        got = sha256_file(directory / e.path)
        if got != e.sha256:
            bad.append(f"  {directory / e.path}: sha256 {got}, the manifest says {e.sha256}")
    if bad:
        raise ChecksumMismatch("bench data differs from bench/data/benchdata_manifest.json:\n" + "\n".join(bad))
    return [e.path for e in entries]
