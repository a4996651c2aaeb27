"""The bench data manifest, the locator every bench uses, and ``make benchdata`` (scripts/benchdata.py):
real files in temporary folders, sources served over real HTTP. Nothing here needs the data itself."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from bench import _benchdata as bd
from tests.helpers.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script(ROOT / "scripts" / "benchdata.py", "benchdata_script")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_manifest(path: Path, files: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"about": "test", "files": files}), encoding="utf-8")
    return path


def _entry(rel: str, data: bytes, url: str = "https://example.org/x", **extra: Any) -> dict[str, Any]:
    return {"path": rel, "sha256": _sha(data), "bytes": len(data), "licence": "CC0", "source": {"url": url}, **extra}


# --- the shipped manifest -------------------------------------------------------------------------------

def test_the_shipped_manifest_names_a_pinned_source_licence_and_sha256_for_every_file(script: ModuleType) -> None:
    m = bd.load_manifest()
    paths = {e.path for e in m.entries}
    assert {"ragtruth_qa_dev.jsonl", "ragtruth_summary_dev.jsonl", "ragtruth_data2txt_dev.jsonl",
            "wikiqa_ranked_dev.jsonl", "retrieval/hotpotqa_dev_103.json", "retrieval/wice_claim_dev.jsonl",
            "retrieval/scifact/corpus.jsonl.gz", "retrieval/scifact/queries.test.jsonl",
            "retrieval/scifact/qrels.test.tsv"} <= paths
    for e in m.entries:
        assert e.licence and e.bytes > 0 and e.note, e.path
        url = e.source["url"]
        if "github" in url:  # a GitHub file is pinned to a commit, never a branch
            assert re.match(r"https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/", url), url
        if e.check == "reproduced":  # rebuilt byte for byte from a source whose own bytes are pinned
            assert re.fullmatch(r"[0-9a-f]{64}", e.source.get("sha256", "")), e.path
        else:
            assert "local copy only" in e.note, e.path
        kind = (e.derive or {}).get("kind")
        assert kind in (None, "ragtruth-dev", "wikiqa-ranked", "json-array-head", "jsonl-ids-in-qrels", "gzip")
    # the reader's training data names the same RAGTruth files with the same sha256
    reader = json.loads((ROOT / "ragmon" / "scoring" / "reader" / "data_manifest.json").read_text(encoding="utf-8"))
    for source in reader["sources"]:
        if source.get("benchdata"):
            assert m.entry(source["file"]).sha256 == source["sha256"], source["file"]


@pytest.mark.parametrize("broken, message", [
    ({"sha256": "abc"}, "sha256 is not 64"),
    ({"path": "../outside.jsonl"}, "not a plain relative path"),
    ({"path": "/etc/passwd"}, "not a plain relative path"),
    ({"source": {}}, "source has no url"),
    ({"check": "trust me"}, "check is"),
])
def test_a_malformed_manifest_entry_is_refused_by_name(tmp_path: Path, broken: dict[str, Any], message: str) -> None:
    entry = {**_entry("a.jsonl", b"{}\n"), **broken}
    with pytest.raises(ValueError, match=message):
        bd.load_manifest(_write_manifest(tmp_path / "m.json", [entry]))


def test_a_path_listed_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="listed twice"):
        bd.load_manifest(_write_manifest(tmp_path / "m.json", [_entry("a", b"1"), _entry("a", b"2")]))


# --- verify: sha256 -------------------------------------------------------------------------------------

def test_verify_accepts_the_manifest_bytes_and_names_the_file_that_differs(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    (folder / "retrieval").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(b'{"id": 1}\n')
    (folder / "retrieval" / "b.json").write_bytes(b"[1, 2]")
    (folder / "unlisted.txt").write_text("ignored")
    m = bd.load_manifest(_write_manifest(tmp_path / "m.json", [
        _entry("a.jsonl", b'{"id": 1}\n'), _entry("retrieval/b.json", b"[1, 2]")]))
    assert bd.verify(folder, m) == ["a.jsonl", "retrieval/b.json"]

    (folder / "retrieval" / "b.json").write_bytes(b"[1, 3]")  # one byte
    with pytest.raises(bd.ChecksumMismatch, match=r"retrieval/b\.json: sha256 [0-9a-f]{64}") as err:
        bd.verify(folder, m)
    assert "a.jsonl" not in str(err.value)

    (folder / "a.jsonl").unlink()
    with pytest.raises(bd.MissingBenchdata, match=r"a\.jsonl"):
        bd.verify(folder, m)


# --- the locator ----------------------------------------------------------------------------------------

def test_the_locator_reads_RAGMON_BENCHDATA_and_says_what_is_missing(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMON_BENCHDATA", str(tmp_path))
    (tmp_path / "retrieval").mkdir()
    (tmp_path / "retrieval" / "wice_claim_dev.jsonl").write_text("{}\n")
    assert bd.benchdata_dir() == tmp_path
    assert bd.benchdata_file("retrieval/wice_claim_dev.jsonl") == tmp_path / "retrieval" / "wice_claim_dev.jsonl"
    assert bd.missing(["retrieval/wice_claim_dev.jsonl", "ragtruth_qa_dev.jsonl"]) == ["ragtruth_qa_dev.jsonl"]
    with pytest.raises(bd.MissingBenchdata) as err:
        bd.require("retrieval/wice_claim_dev.jsonl", "ragtruth_qa_dev.jsonl", "wikiqa_ranked_dev.jsonl")
    text = str(err.value)
    assert str(tmp_path / "ragtruth_qa_dev.jsonl") in text and str(tmp_path / "wikiqa_ranked_dev.jsonl") in text
    assert "wice" not in text  # only what is missing
    assert "RAGMON_BENCHDATA points at" in text and "make benchdata" in text
    assert isinstance(err.value, SystemExit)  # a bench stops with the message, not a traceback


def test_without_RAGMON_BENCHDATA_the_locator_reads_the_clone_own_cache(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGMON_BENCHDATA", raising=False)
    assert bd.benchdata_dir() == ROOT / ".cache" / "benchdata"
    reason = bd.missing_reason(["nowhere.jsonl"])
    assert "nowhere.jsonl" in reason and "run `make benchdata`" in reason
    (tmp_path / "x.jsonl").write_text("{}\n")
    assert bd.benchdata_file("x.jsonl", directory=tmp_path) == tmp_path / "x.jsonl"


def test_a_bench_without_its_data_names_the_files_and_the_command(tmp_path: Path) -> None:
    env = {**os.environ, "RAGMON_BENCHDATA": str(tmp_path / "empty")}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "eval_citation_wice.py"), "--no-write"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "retrieval/wice_claim_dev.jsonl" in out.stderr and "make benchdata" in out.stderr
    assert "Traceback" not in out.stderr


# --- derivations ----------------------------------------------------------------------------------------

def _faithjudge_source() -> bytes:
    """Two documents in vectara/FaithJudge's RAGTruth shape (written here, not copied from the set)."""
    span = {"start": 0, "end": 4, "text": "Blue", "meta": "x", "label_type": "Subtle Baseless Info",
            "implicit_true": True, "due_to_null": False}
    hard = {**span, "label_type": "Evident Conflict", "implicit_true": False}
    rows = [
        {"source_id": 7, "source": {"question": "what colour is the sky",
                                    "passages": "passage 1:The sky is blue.\n\npassage 2:Ça va.\n\n"},
         "responses": [{"response": "Blue.", "model": "m1", "labels": []},
                       {"response": "Blue, mostly.", "model": "m2", "labels": [span]}]},
        {"source_id": 9, "source": {"question": "q", "passages": "passage 1:p\n\n"},
         "responses": [{"response": "No.", "model": "m3", "labels": [span, hard]}]},
    ]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_ragtruth_dev_keeps_the_listed_sources_and_reads_the_labels(script: ModuleType) -> None:
    rows = [json.loads(line) for line in script.ragtruth_dev(_faithjudge_source(), "qa", [7]).decode().splitlines()]
    assert [r["id"] for r in rows] == ["ragtruth-qa-7-0", "ragtruth-qa-7-1"]
    assert rows[0]["contexts"] == ["The sky is blue.", "Ça va."] and rows[0]["question"] == "what colour is the sky"
    assert [r["labels"]["faithful"] for r in rows] == [1, 0]
    assert [r["meta"]["faithful_lenient"] for r in rows] == [1, 1]  # the mild span alone is forgiven
    both = script.ragtruth_dev(_faithjudge_source(), "qa", [9]).decode()
    assert json.loads(both)["meta"]["faithful_lenient"] == 0
    assert "Ça va" in script.ragtruth_dev(_faithjudge_source(), "qa", [7, 9]).decode()  # not \\u-escaped
    with pytest.raises(ValueError, match="not in the source"):
        script.ragtruth_dev(_faithjudge_source(), "qa", [7, 8])


def test_wikiqa_ranked_keeps_document_order_and_the_human_labels(script: ModuleType) -> None:
    tsv = (b"QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel\n"
           b"Q1\thow x\tD1\tX\tD1-0\tX is a thing.\t0\nQ1\thow x\tD1\tX\tD1-1\tX works so.\t1\n"
           b"Q2\twho y\tD2\tY\tD2-0\tY is.\t0\n")
    (row,) = [json.loads(line) for line in script.wikiqa_ranked(tsv, ["Q1"]).decode().splitlines()]
    assert row["id"] == "wikiqa-q-Q1" and row["contexts"] == ["X is a thing.", "X works so."]
    assert row["meta"] == {"context_labels": [0, 1], "doc_title": "X"} and row["labels"]["context_relevant"] == 1
    with pytest.raises(ValueError, match="header"):
        script.wikiqa_ranked(b"a\tb\n", ["Q1"])


def test_json_array_head_cuts_the_source_bytes_without_reserialising(script: ModuleType) -> None:
    source = b'[{"a":"x\\/y"}, {"b":[1,2]},{"c":"\\u00e9"} ,{"d":4}]'
    assert script.json_array_head(source, 3) == b'[{"a":"x\\/y"}, {"b":[1,2]},{"c":"\\u00e9"}]'
    assert script.json_array_head(script.json_array_head(source, 3), 3) == script.json_array_head(source, 3)
    with pytest.raises(ValueError, match="only 4 items"):
        script.json_array_head(source, 5)


def test_jsonl_ids_in_qrels_keeps_the_queried_rows_in_source_order(script: ModuleType) -> None:
    queries = (b'{"_id": "1", "text": "a", "metadata": {}}\n{"_id": "2", "text": "b", "metadata": {}}\n'
               b'{"_id": "3", "text": "c", "metadata": {"9": [{"sentences": [4], "label": "SUPPORT"}]}}\n')
    qrels = b"query-id\tcorpus-id\tscore\n3\t10\t1\n1\t11\t1\n1\t12\t1\n"
    kept = script.jsonl_ids_in_qrels(queries, qrels)
    assert kept.splitlines() == [queries.splitlines()[0], queries.splitlines()[2]]  # json.dumps bytes: unchanged
    emptied = script.jsonl_ids_in_qrels(queries, qrels, empty_metadata=True)
    assert emptied.splitlines()[1] == b'{"_id": "3", "text": "c", "metadata": {}}'


@pytest.mark.skipif(shutil.which("gzip") is None, reason="needs GNU gzip")
def test_gzip_writes_what_gzip_dash_9_writes_for_a_file_of_that_name_and_time(script: ModuleType,
                                                                               tmp_path: Path) -> None:
    text = "".join(json.dumps({"_id": str(i), "text": "word " * (i % 50)}) + "\n" for i in range(3000)).encode()
    plain = tmp_path / "corpus.jsonl"
    plain.write_bytes(text)
    os.utime(plain, (1_700_000_000, 1_700_000_000))
    expected = subprocess.run(["gzip", "-9", "-c", str(plain)], capture_output=True, check=True).stdout
    got = script.gzip_file(text, "corpus.jsonl", 1_700_000_000)
    assert got == expected
    assert gzip.decompress(got) == text


# --- make benchdata: fetch over HTTP, derive, check ---------------------------------------------------

class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real HTTP server over a folder of source files."""
    root = tmp_path / "www"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def _zip(path: Path, members: dict[str, bytes]) -> bytes:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path.read_bytes()


def test_make_benchdata_fetches_derives_and_checks_every_file(script: ModuleType, served: tuple[str, Path],
                                                              tmp_path: Path) -> None:
    url, www = served
    source = _faithjudge_source()
    (www / "ragtruth_qa.jsonl").write_bytes(source)
    queries = b'{"_id": "1", "text": "a"}\n{"_id": "2", "text": "b"}\n'
    qrels = b"query-id\tcorpus-id\tscore\n2\t10\t1\n"
    archive = _zip(www / "set.zip", {"set/queries.jsonl": queries, "set/qrels/test.tsv": qrels})
    licence = b"MIT\n"
    (www / "LICENSE").write_bytes(licence)
    qa = script.ragtruth_dev(source, "qa", [7])
    manifest = _write_manifest(tmp_path / "m.json", [
        _entry("ragtruth_qa_dev.jsonl", qa, check="reproduced", note="n",
               source={"url": f"{url}/ragtruth_qa.jsonl", "sha256": _sha(source)},
               derive={"kind": "ragtruth-dev", "task": "qa", "source_ids": [7]}),
        _entry("LICENSE.X", licence, f"{url}/LICENSE"),
        _entry("retrieval/set/queries.test.jsonl", b'{"_id": "2", "text": "b"}\n',
               source={"url": f"{url}/set.zip", "md5": hashlib.md5(archive).hexdigest(),
                       "member": "set/queries.jsonl"},
               derive={"kind": "jsonl-ids-in-qrels", "qrels_member": "set/qrels/test.tsv"}),
        _entry("retrieval/set/qrels.test.tsv", qrels, source={"url": f"{url}/set.zip", "member": "set/qrels/test.tsv"}),
    ])
    dest = tmp_path / "cache"
    assert script.main(["--dest", str(dest), "--manifest", str(manifest)]) == 0
    assert (dest / "ragtruth_qa_dev.jsonl").read_bytes() == qa
    assert (dest / "retrieval" / "set" / "qrels.test.tsv").read_bytes() == qrels
    assert bd.verify(dest, bd.load_manifest(manifest)) == [
        "ragtruth_qa_dev.jsonl", "LICENSE.X", "retrieval/set/queries.test.jsonl", "retrieval/set/qrels.test.tsv"]
    assert script.main(["--check", "--dest", str(dest), "--manifest", str(manifest)]) == 0

    # a second run downloads nothing: the server's files may go
    for f in www.iterdir():
        f.unlink()
    assert script.main(["--dest", str(dest), "--manifest", str(manifest)]) == 0


def test_a_derived_file_with_other_bytes_is_an_error_naming_it_and_is_not_installed(
        script: ModuleType, served: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, www = served
    (www / "a.txt").write_bytes(b"the source\n")
    (www / "b.txt").write_bytes(b"fine\n")
    manifest = _write_manifest(tmp_path / "m.json", [
        _entry("a.txt", b"what the manifest expected\n", f"{url}/a.txt"),
        _entry("b.txt", b"fine\n", f"{url}/b.txt"),
        _entry("c.txt", b"never served\n", f"{url}/c.txt"),
    ])
    dest = tmp_path / "cache"
    assert script.main(["--dest", str(dest), "--manifest", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert re.search(r"a\.txt: derived from .* has sha256 [0-9a-f]{64}, the manifest says", err)
    assert "c.txt: cannot download" in err
    assert not (dest / "a.txt").exists() and (dest / "b.txt").read_bytes() == b"fine\n"  # the rest still made
    assert script.main(["--check", "--dest", str(dest), "--manifest", str(manifest)]) == 1


def test_a_source_whose_own_checksum_differs_is_refused(script: ModuleType, served: tuple[str, Path],
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, www = served
    (www / "a.txt").write_bytes(b"changed upstream\n")
    manifest = _write_manifest(tmp_path / "m.json", [
        _entry("a.txt", b"changed upstream\n", source={"url": f"{url}/a.txt", "sha256": _sha(b"pinned\n")})])
    assert script.main(["--dest", str(tmp_path / "cache"), "--manifest", str(manifest)]) == 1
    assert f"source {url}/a.txt" in capsys.readouterr().err


def test_with_RAGMON_BENCHDATA_the_local_copy_is_checked_and_used(script: ModuleType, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "a.jsonl").write_bytes(b"{}\n")
    manifest = _write_manifest(tmp_path / "m.json", [_entry("a.jsonl", b"{}\n", "https://unreachable.invalid/a")])
    cache = tmp_path / "clone" / ".cache" / "benchdata"
    monkeypatch.setattr(script, "CACHE", cache)
    monkeypatch.setenv("RAGMON_BENCHDATA", str(copy))
    assert script.main(["--manifest", str(manifest)]) == 0  # nothing downloaded
    assert cache.resolve() == copy.resolve()  # the clone's cache points at it: later runs find it unset too
    assert bd.benchdata_file("a.jsonl") == copy / "a.jsonl"

    (copy / "a.jsonl").write_bytes(b"[]\n")
    assert script.main(["--manifest", str(manifest)]) == 1
    assert "a.jsonl: sha256" in capsys.readouterr().err


def test_the_bench_data_here_if_any_matches_the_manifest() -> None:
    names = [e.path for e in bd.load_manifest().entries]
    if bd.missing(names):
        pytest.skip(bd.missing_reason(names))
    assert bd.verify(bd.benchdata_dir()) == names
