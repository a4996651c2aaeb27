"""docs/architecture.md stays true: its rooms exist and cover ragmon/, no import crosses its table,
there is no import circle and no private name imported across modules, RAGMON_* variables are read
only through the settings table or env.py, foreign libraries (protobuf, Kafka, httpx, onnx) stay in
their rooms, every command is written one way, and every path the page
(and README's Development section) names exists. The imports are read from the source (ast), all of
them: function-level imports count, ``if TYPE_CHECKING:`` ones do not."""

from __future__ import annotations

import ast
import glob
import importlib
import re
from collections import defaultdict
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ragmon"
DOC = ROOT / "docs" / "architecture.md"

ENV_READERS = frozenset({"ragmon.config_table", "ragmon.env"})


@cache
def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def room_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return f"{parts[1]}/" if (PACKAGE / parts[1]).is_dir() else parts[1]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for other in node.orelse:
                yield from _import_nodes(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _import_nodes(node)


@cache
def imports() -> dict[str, list[tuple[str, str | None, int]]]:
    """module -> (imported module, imported name or None, line), ragmon's own imports only."""
    out: dict[str, list[tuple[str, str | None, int]]] = {}
    for name, path in modules().items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found = []
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [(alias.name, None, node.lineno) for alias in node.names]
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found += [(target, alias.name, node.lineno) for alias in node.names]
        out[name] = [(t, n, line) for t, n, line in found if t == "ragmon" or t.startswith("ragmon.")]
    return out


@cache
def edges() -> dict[str, set[str]]:
    """module -> the modules it imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    known = modules()
    out: dict[str, set[str]] = defaultdict(set)
    for name, found in imports().items():
        for target, imported, _ in found:
            module = f"{target}.{imported}" if imported and f"{target}.{imported}" in known else target
            if module in known and module != name:
                out[name].add(module)
    return out


@cache
def documented() -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """(the floor, room -> the rooms it may import besides the floor), read from docs/architecture.md."""
    text = DOC.read_text(encoding="utf-8")
    floor_text = text[text.index("The **floor**"):text.index("Every other room")]
    floor = frozenset(re.findall(r"`(\w+)` \(", floor_text))
    table = text[text.index("<!-- rooms:start -->"):text.index("<!-- rooms:end -->")]
    rooms: dict[str, frozenset[str]] = {}
    for line in table.splitlines()[3:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 3, line
        room = cells[0].strip("`")
        rooms[room] = frozenset(re.findall(r"`([\w/]+)`", cells[2]))
    return floor, rooms


def test_every_room_exists_and_every_module_belongs_to_one() -> None:
    floor, rooms = documented()
    assert len(floor) >= 8 and len(rooms) >= 15  # the page was really read
    for room in floor | set(rooms):
        if room in ("__init__", "__main__"):
            assert (PACKAGE / f"{room}.py").is_file(), room
        elif room.endswith("/"):
            assert (PACKAGE / room / "__init__.py").is_file(), f"package {room} listed but missing"
        else:
            assert (PACKAGE / f"{room}.py").is_file(), f"module {room} listed but missing"
    for allowed in rooms.values():
        assert allowed <= set(rooms) | floor, allowed
    unlisted = sorted({room_of(m) for m in modules()} - floor - set(rooms))
    assert not unlisted, f"rooms missing from docs/architecture.md: {unlisted}"


def test_no_import_crosses_the_table() -> None:
    floor, rooms = documented()
    wrong = []
    for module, targets in edges().items():
        here = room_of(module)
        for target in targets:
            there = room_of(target)
            if there == here:
                continue
            allowed = floor if here in floor else floor | rooms[here]
            if there not in allowed:
                wrong.append(f"{module} -> {target} ({here} may not import {there})")
    assert not wrong, "\n".join(wrong)


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph = edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in modules():
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle() -> None:
    circles = _circles()
    assert not circles, f"import circles: {circles}"


def test_the_circle_finder_finds_a_circle() -> None:
    edges.cache_clear()
    try:
        graph = edges()
        graph["ragmon.semconv"].add("ragmon.errors")  # errors imports semconv: now a circle
        assert ["ragmon.errors", "ragmon.semconv"] in _circles()
    finally:
        edges.cache_clear()


def test_no_private_name_imported_across_modules() -> None:
    known = modules()
    wrong = []
    for module, found in imports().items():
        for target, name, line in found:
            where = f"{known[module].relative_to(ROOT)}:{line}"
            full = f"{target}.{name}" if name else target
            if name and name.startswith("_") and not name.startswith("__") and full not in known:
                wrong.append(f"{where}: private name {full}")
            imported_module = full if full in known else target
            parts = imported_module.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    inside = module == owner or module.startswith(owner + ".")
                    if not inside:
                        wrong.append(f"{where}: private module {imported_module} outside {owner}")
                    break
    assert not wrong, "\n".join(wrong)


def test_ragmon_variables_are_read_through_the_settings_table_or_env_py() -> None:
    wrong = []
    for module, path in modules().items():
        if module in ENV_READERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(
                    r"RAGMON_[A-Z0-9_]+", node.value):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert not wrong, "name these in config_table.py's table or env.py:\n" + "\n".join(wrong)


# foreign objects stay behind their edge (docs/architecture.md, "Rules"): library -> where it may be imported
CONFINED = {
    "google.protobuf": ("ragmon.ingest.",),
    "google.rpc": ("ragmon.ingest.",),
    "opentelemetry.proto": ("ragmon.ingest.",),
    "grpc": ("ragmon.ingest.",),
    "aiokafka": ("ragmon.ingest.kafka.", "ragmon.sdk.kafka_exporter"),
    "httpx": ("ragmon.scoring.llm.", "ragmon.demo.runner"),
    "onnx": ("ragmon.scoring.local.", "ragmon.scoring.reader.export", "ragmon.scoring.reader.fixed_ranges",
             "ragmon.scoring.reader.seven_bit"),
    # one shared runner loads every model (the embedder's and the reader's); export quantizes and
    # fixed_ranges measures the activations' ranges at export
    "onnxruntime": ("ragmon.scoring.onnx_runner", "ragmon.scoring.reader.export", "ragmon.scoring.reader.fixed_ranges"),
    # the reader's training recipe only (the `train` extra), never the agent
    "torch": ("ragmon.scoring.reader.train", "ragmon.scoring.reader.export"),
    "transformers": ("ragmon.scoring.reader.train", "ragmon.scoring.reader.export"),
}


def test_foreign_libraries_stay_in_their_rooms() -> None:
    wrong = []
    for module, path in modules().items():
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                names = [node.module] if node.level == 0 and node.module else []
            for name in names:
                library = next((lib for lib in CONFINED if name == lib or name.startswith(lib + ".")), None)
                if library is not None and not module.startswith(CONFINED[library]):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not wrong, "\n".join(wrong)


def test_every_command_is_written_one_way() -> None:
    from ragmon import cli

    names = []
    for path in cli.COMMANDS:
        command = importlib.import_module(path)
        assert path.rsplit(".", 1)[1] == "command" or path.endswith("_command"), path
        for attribute in ("NAME", "HELP", "DESCRIPTION", "add_arguments", "run"):
            assert hasattr(command, attribute), f"{path} has no {attribute}"
        names.append(command.NAME)
    assert len(set(names)) == len(names)
    commandish = {m for m in modules() if m.endswith((".command", "_command"))}
    assert commandish == set(cli.COMMANDS), "a command module that cli.COMMANDS does not list (or the reverse)"


def _named_paths(text: str) -> set[str]:
    return {t for t in re.findall(r"`([\w./*-]+)`", text) if "/" in t and ("." in t.rsplit("/", 1)[-1] or
                                                                               t.endswith("/"))}


@pytest.mark.parametrize("where", ["docs/architecture.md", "README.md#Development"])
def test_every_path_named_exists(where: str) -> None:
    text = (ROOT / where.split("#")[0]).read_text(encoding="utf-8")
    if where.endswith("#Development"):
        text = text[text.index("## Development"):]
        assert "docs/architecture.md" in text, "README's Development section points to docs/architecture.md"
    paths = _named_paths(text)
    assert paths, "the page names paths"
    missing = [p for p in sorted(paths)
               if not any(glob.glob(str(base / p)) for base in (ROOT, PACKAGE))]
    assert not missing, f"{where} names paths that do not exist: {missing}"
