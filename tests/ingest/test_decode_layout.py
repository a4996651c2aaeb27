"""The decode path's layout, read from the source (``ast``): no module of ``ragmon/ingest`` imports
inside a function or declares a ``global`` (the ways an import circle used to be dodged), and the
readers (``decode/``) import the span view (``extract/``), never the other way round. (Circles and
private names across all of ragmon are tests/core/test_architecture.py's.)"""

from __future__ import annotations

import ast
from pathlib import Path

import ragmon.ingest

INGEST = Path(ragmon.ingest.__file__).resolve().parent
READERS = "decode"  # the package of the readers (ragmon/ingest/decode/)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def test_no_imports_or_globals_inside_functions() -> None:
    paths = sorted(INGEST.rglob("*.py"))
    assert len(paths) > 25
    for path in paths:
        for function in ast.walk(_tree(path)):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = [n for n in ast.walk(function) if isinstance(n, ast.Import | ast.ImportFrom | ast.Global)]
                assert not inner, f"{path.relative_to(INGEST)}: {function.name} imports or declares a global inside"


def test_the_span_view_imports_no_reader() -> None:
    assert (INGEST / READERS / "otlp_proto.py").is_file()
    for path in sorted((INGEST / "extract").glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 2:  # from ..X (ingest's X)
                module = (node.module or "").split(".")[0]
                names = {alias.name for alias in node.names} if not module else set()
                assert module != READERS and READERS not in names, f"extract/{path.name} imports a reader"
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert not (node.module or "").startswith(f"ragmon.ingest.{READERS}"), f"extract/{path.name}"
