#!/usr/bin/env python3
"""Fetch the benches' labelled data from its public sources, or check a local copy (``make benchdata``).

    python scripts/benchdata.py                       # fetch + derive into .cache/benchdata, check sha256
    RAGMON_BENCHDATA=/path python scripts/benchdata.py  # check that copy (and use it: the benches read it)
    python scripts/benchdata.py --check [--dest DIR]  # check only, download nothing
    python scripts/benchdata.py --sources DIR         # take source files from DIR (by their URL's file
                                                      # name) before downloading them

Every file of ``bench/data/benchdata_manifest.json`` is rebuilt from its source by the derivation the
manifest names, then compared with the manifest's sha256: a mismatch is an error naming the file and
the bad bytes are not installed. Downloads are kept in ``DEST/.sources`` and checked against the
source's own sha256 (or the md5 its publisher gives) when the manifest has one. Files already present
with the right sha256 are left alone. Standard library only; ``gzip`` (GNU) for the one gzip file.

Derivations (``derive.kind``):
  (none)              the source file (or the archive member ``source.member``) as it is
  ragtruth-dev        vectara/FaithJudge ``eval_data/ragtruth_<task>.jsonl`` -> ragmon's calibration rows
                      (bench/data/README.md), one row per response, for the listed source ids only
  wikiqa-ranked       WikiQA-test.tsv -> one row per listed question: its sentences in document order as
                      contexts, their human labels in ``meta.context_labels``
  json-array-head     the source's bytes up to the end of its first N top-level items, then ``]``
  jsonl-ids-in-qrels  the rows of a JSONL member whose ``_id`` is a query id of a qrels TSV member (their
                      ``metadata`` emptied where ``empty_metadata`` is set)
  gzip                ``gzip -9 -n`` of the source, with the header's file name and time set as listed
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchdata import (  # noqa: E402
    CACHE,
    ENV,
    BenchdataError,
    ChecksumMismatch,
    Entry,
    Manifest,
    load_manifest,
    sha256_file,
    verify,
)

SOURCES = ".sources"  # downloads, under the destination folder
TIMEOUT_S = 120


class SourceUnavailable(BenchdataError):
    """A source could not be downloaded (asked once per run, however many files it feeds)."""


# --- derivations: pure functions of bytes ------------------------------------------------------------

def ragtruth_dev(data: bytes, task: str, source_ids: list[int]) -> bytes:
    """FaithJudge's RAGTruth file (one source per line, its responses with their labelled spans) to
    ragmon's calibration rows for the sources listed, in the file's order. ``faithful`` is 0 where any
    span is labelled; ``faithful_lenient`` ignores spans marked ``implicit_true`` or ``due_to_null``
    (the mildest class: true but not in the source, or read off a null field)."""
    wanted = set(source_ids)
    out: list[str] = []
    seen: set[int] = set()
    for line in data.decode("utf-8").splitlines():
        if not line.strip():
            continue
        src = json.loads(line)
        if src["source_id"] not in wanted:
            continue
        seen.add(src["source_id"])
        s = src["source"]
        if task == "qa":
            question = s["question"]
            contexts = [p.strip() for p in re.split(r"passage \d+:", s["passages"]) if p.strip()]
        elif task == "summary":
            question, contexts = None, [s]
        elif task == "data2txt":
            question, contexts = None, [json.dumps(s, ensure_ascii=False)]
        else:
            raise ValueError(f"unknown RAGTruth task {task!r}")
        for k, resp in enumerate(src["responses"]):
            spans = resp["labels"]
            lenient = 0 if any(not (x["implicit_true"] or x["due_to_null"]) for x in spans) else 1
            out.append(json.dumps({
                "id": f"ragtruth-{task}-{src['source_id']}-{k}", "dataset": "ragtruth", "task": task,
                "question": question, "contexts": contexts, "answer": resp["response"],
                "labels": {"faithful": 0 if spans else 1, "answer_relevant": None, "context_relevant": None},
                "meta": {"source_id": src["source_id"], "generator": resp["model"], "faithful_lenient": lenient,
                         "hallucination_spans": spans},
            }, ensure_ascii=False))
    if seen != wanted:
        raise ValueError(f"source ids not in the source file: {sorted(wanted - seen)[:10]}")
    return "".join(line + "\n" for line in out).encode("utf-8")


def wikiqa_ranked(data: bytes, question_ids: list[str]) -> bytes:
    """WikiQA's TSV (QuestionID, Question, DocumentID, DocumentTitle, SentenceID, Sentence, Label) to
    one row per listed question: every candidate sentence of its article, in order, as ``contexts``,
    the human labels as ``meta.context_labels`` (1 = answers the question)."""
    questions: dict[str, dict[str, Any]] = {}
    lines = data.decode("utf-8").split("\n")
    if lines[0].split("\t")[:2] != ["QuestionID", "Question"]:
        raise ValueError("not WikiQA's TSV: the header does not start QuestionID, Question")
    for line in lines[1:]:
        if not line:
            continue
        qid, question, _doc, title, _sid, sentence, label = line.split("\t")
        q = questions.setdefault(qid, {"question": question, "title": title, "sentences": [], "labels": []})
        q["sentences"].append(sentence)
        q["labels"].append(int(label))
    absent = [q for q in question_ids if q not in questions]
    if absent:
        raise ValueError(f"question ids not in the source file: {absent[:10]}")
    wanted = set(question_ids)
    out = []
    for qid, q in questions.items():
        if qid in wanted:
            out.append(json.dumps({
                "id": f"wikiqa-q-{qid}", "dataset": "wikiqa_test_ranked", "task": "qa", "question": q["question"],
                "contexts": q["sentences"], "answer": None,
                "labels": {"faithful": None, "answer_relevant": None, "context_relevant": int(any(q["labels"]))},
                "meta": {"context_labels": q["labels"], "doc_title": q["title"]},
            }, ensure_ascii=False))
    return "".join(line + "\n" for line in out).encode("utf-8")


def json_array_head(data: bytes, items: int) -> bytes:
    """The source's own bytes up to the end of its first ``items`` top-level array items, then ``]``
    (no re-serialisation: the items keep the source's spacing and escapes)."""
    text = data.decode("utf-8")
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if text[pos:pos + 1] != "[":
        raise ValueError("the source is not a JSON array")
    pos += 1
    for n in range(items):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            raise ValueError(f"the source array has only {n} items, {items} wanted")
        _, pos = decoder.raw_decode(text, pos)
    return (text[:pos] + "]").encode("utf-8")


def jsonl_ids_in_qrels(data: bytes, qrels: bytes, empty_metadata: bool = False) -> bytes:
    """The rows of a JSONL file whose ``_id`` is a query id of the qrels TSV (header
    ``query-id corpus-id score``), in the JSONL file's order, written as ``json.dumps`` writes them;
    with ``empty_metadata``, each row's ``metadata`` becomes ``{}`` (BEIR's SciFact queries carry
    the claims' evidence there)."""
    ids = {line.split("\t")[0] for line in qrels.decode("utf-8").splitlines()[1:] if line.strip()}
    out = []
    for line in data.decode("utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row["_id"] in ids:
            if empty_metadata:
                row["metadata"] = {}
            out.append(json.dumps(row) + "\n")
    return "".join(out).encode("utf-8")


def gzip_file(data: bytes, name: str, mtime: int) -> bytes:
    """``gzip -9 -n`` (GNU gzip: zlib's level 9 compresses the same text to other bytes) with the
    header naming ``name`` and ``mtime``, as ``gzip -9 name`` writes it."""
    gz = shutil.which("gzip")
    if gz is None:
        raise BenchdataError("deriving a .gz bench file needs GNU gzip on PATH")
    body = subprocess.run([gz, "-9", "-n", "-c"], input=data, capture_output=True, check=True).stdout
    if body[:4] != b"\x1f\x8b\x08\x00":
        raise BenchdataError("gzip wrote an unexpected header")
    return b"\x1f\x8b\x08\x08" + struct.pack("<I", mtime) + body[8:10] + name.encode("latin-1") + b"\0" + body[10:]


def derive(entry: Entry, read_source: Callable[[str | None], bytes]) -> bytes:
    """The file's bytes from its source (``read_source(member)`` gives the source file, or one member
    of the source archive)."""
    d = entry.derive or {}
    kind = d.get("kind")
    member = entry.source.get("member")
    if d.get("input_sha256"):  # the text the derivation starts from, checked apart from the result
        got = hashlib.sha256(read_source(member)).hexdigest()
        if got != d["input_sha256"]:
            raise ChecksumMismatch(f"{entry.path}: its input {member or entry.source['url']} has sha256 {got}, "
                                   f"the manifest says {d['input_sha256']}")
    if kind is None:
        return read_source(member)
    if kind == "ragtruth-dev":
        return ragtruth_dev(read_source(member), d["task"], d["source_ids"])
    if kind == "wikiqa-ranked":
        return wikiqa_ranked(read_source(member), d["question_ids"])
    if kind == "json-array-head":
        return json_array_head(read_source(member), int(d["items"]))
    if kind == "jsonl-ids-in-qrels":
        return jsonl_ids_in_qrels(read_source(member), read_source(d["qrels_member"]), bool(d.get("empty_metadata")))
    if kind == "gzip":
        return gzip_file(read_source(member), d["name"], int(d["mtime"]))
    raise ValueError(f"{entry.path}: unknown derivation {kind!r}")


# --- sources --------------------------------------------------------------------------------------------

def _source_name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def fetch_source(source: dict[str, Any], store: Path, local: Path | None = None) -> Path:
    """The source file, from ``local`` (a folder of already downloaded sources, by file name), the
    download store, or its URL; checked against the source's sha256 / md5 when the manifest gives one."""
    url = str(source["url"])
    name = _source_name(url)
    path = store / f"{hashlib.sha256(url.encode()).hexdigest()[:12]}-{name}"
    if local is not None and (local / name).is_file():
        path = local / name
    elif not path.is_file():
        store.mkdir(parents=True, exist_ok=True)
        print(f"  downloading {url}", flush=True)
        tmp = path.with_suffix(path.suffix + ".part")
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, tmp.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise SourceUnavailable(f"cannot download {url}: {exc}") from exc
        tmp.replace(path)
    for algo in ("sha256", "md5"):
        if source.get(algo):
            h = hashlib.new(algo)
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != source[algo]:
                raise ChecksumMismatch(f"source {url} ({path}): {algo} {h.hexdigest()}, the manifest says "
                                       f"{source[algo]}")
    return path


def build(entry: Entry, store: Path, local: Path | None = None) -> bytes:
    """Fetch the entry's source, derive the file and check it against the manifest's sha256."""
    source = fetch_source(entry.source, store, local)

    def read(member: str | None) -> bytes:
        if member is None:
            return source.read_bytes()
        with zipfile.ZipFile(source) as z:
            return z.read(member)

    data = derive(entry, read)
    got = hashlib.sha256(data).hexdigest()
    if got != entry.sha256:
        raise ChecksumMismatch(f"{entry.path}: derived from {entry.source['url']} has sha256 {got}, the manifest "
                               f"says {entry.sha256}; not installed")
    return data


def fetch_all(manifest: Manifest, dest: Path, local: Path | None = None) -> list[str]:
    """Make every manifest file present and verified in ``dest``; returns the problems (one line per
    file that could not be made), after trying every file."""
    problems = []
    store = dest / SOURCES
    unavailable: dict[str, str] = {}
    for entry in manifest.entries:
        target = dest / entry.path
        if target.is_file() and sha256_file(target) == entry.sha256:
            print(f"ok      {entry.path} (already there)")
            continue
        try:
            if entry.source["url"] in unavailable:
                raise SourceUnavailable(unavailable[entry.source["url"]])
            data = build(entry, store, local)
        except SourceUnavailable as exc:
            unavailable[entry.source["url"]] = str(exc)
            problems.append(f"{entry.path}: {exc}")
            print(f"FAILED  {entry.path}: {exc}", flush=True)
            continue
        except (BenchdataError, ValueError, KeyError, OSError, zipfile.BadZipFile,
                subprocess.CalledProcessError) as exc:
            problems.append(f"{entry.path}: {exc}")
            print(f"FAILED  {entry.path}: {exc}", flush=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
            tmp.write(data)
        Path(tmp.name).replace(target)
        print(f"fetched {entry.path} ({len(data):,} bytes)", flush=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--dest", type=Path, help=f"folder to fetch into (default: ${ENV} to check, else .cache/benchdata)")
    ap.add_argument("--check", action="store_true", help="only check the files there, download nothing")
    ap.add_argument("--sources", type=Path, help="a folder of already downloaded source files (by URL file name)")
    ap.add_argument("--manifest", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    manifest = load_manifest(args.manifest) if args.manifest else load_manifest()
    env = os.environ.get(ENV)
    if env and args.dest is None:  # a local copy: check it and use it in place
        folder = Path(env).expanduser()
        try:
            checked = verify(folder, manifest)
        except BenchdataError as exc:
            print(f"{ENV}={folder}: {exc}", file=sys.stderr)
            return 1
        print(f"{ENV}={folder}: all {len(checked)} files match bench/data/benchdata_manifest.json")
        if not CACHE.exists() and not CACHE.is_symlink():  # later runs without the variable find it too
            CACHE.parent.mkdir(parents=True, exist_ok=True)
            CACHE.symlink_to(folder.resolve(), target_is_directory=True)
            print(f"linked {CACHE} -> {folder.resolve()}")
        elif CACHE.resolve() != folder.resolve():
            print(f"(the benches read {folder} while {ENV} is set; {CACHE} is read without it)")
        return 0
    dest = args.dest or CACHE
    if args.check:
        try:
            checked = verify(dest, manifest)
        except BenchdataError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"{dest}: all {len(checked)} files match bench/data/benchdata_manifest.json")
        return 0
    problems = fetch_all(manifest, dest, args.sources)
    if problems:
        print(f"\n{len(problems)} of {len(manifest.entries)} bench data files could not be made:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        print(f"(a local copy elsewhere? {ENV}=/path/to/it make benchdata)", file=sys.stderr)
        return 1
    print(f"{dest}: all {len(manifest.entries)} files match bench/data/benchdata_manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

