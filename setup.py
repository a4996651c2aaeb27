"""Builds ragmon's compiled ingest modules (mypyc); every other setting is in pyproject.toml.

The modules listed in ``ragmon/ingest/_native.py`` are compiled unchanged with mypyc (a build
requirement, from PyPI) when a C compiler is at hand. Nothing here may fail the install: without
mypyc or a compiler, or when compiling fails, ragmon installs as pure Python (a warning says why),
and ``RAGMON_PURE_PYTHON`` true at build time skips compiling (read with ragmon's one boolean
parser, ``ragmon/env.py``'s ``parse_bool``, loaded from its file: the build cannot import ragmon,
whose dependencies are not installed yet; env.py imports only the standard library). Next to the
extensions the build writes ``_native.json``: the SHA-256 of each compiled module and of every ragmon module it imports,
directly or not (mypyc bakes their ``Final`` constants and signatures in). At run time ragmon takes
the compiled modules only while those sources are unchanged (``_native.install``).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
NATIVE = ROOT / "ragmon" / "ingest" / "_native.py"
ENV = ROOT / "ragmon" / "env.py"  # the one boolean parser (stdlib only: loadable without ragmon's dependencies)
GROUP = "ragmon.ingest._native"  # the shared library: ragmon/ingest/_native__mypyc.*.so


def _constant(path: Path, name: str) -> object:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(f"{name} not found in {path}")


def _source(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(module: str) -> set[str]:
    """The ragmon modules ``module`` imports (a name imported from a package counts as the
    package unless it is a module of its own)."""
    path = _source(module)
    assert path is not None
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            candidates = [[alias.name] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            name = ".".join(p for p in (base, node.module or "") if p)
            candidates = [[f"{name}.{alias.name}", name] for alias in node.names]
        else:
            continue
        for options in candidates:
            for name in options:
                if name.split(".")[0] == "ragmon" and _source(name) is not None:
                    found.add(name)
                    break
    return found


def recorded_sources(modules: list[str]) -> dict[str, str]:
    """SHA-256 of the compiled modules and of every ragmon module they import, transitively."""
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(_imports(module))
    return {m: hashlib.sha256(_source(m).read_bytes()).hexdigest() for m in sorted(seen)}  # type: ignore[union-attr]


def _env() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ragmon_build_env", ENV)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pure_requested() -> bool:
    """Whether ``env.PURE_PYTHON`` asks for no compiling (``env.read``, ``env.parse_bool``; unset: no;
    a value it cannot read: no, with a warning, as ``_native.pure_requested`` reads it at run time)."""
    env = _env()
    value = env.read(env.PURE_PYTHON)
    if value is None:
        return False
    try:
        return bool(env.parse_bool(value))
    except ValueError:
        print(f"ragmon: {env.PURE_PYTHON}={value!r} is not a boolean; ignored", file=sys.stderr)  # noqa: T201
        return False


def _warn(message: str) -> None:
    print(f"ragmon: {message}; installing the pure-Python ingest path", file=sys.stderr)  # noqa: T201


class OptionalBuildExt(build_ext):
    """``build_ext`` that never fails the install, and records what it compiled."""

    def run(self) -> None:
        if not self.extensions:
            return
        inplace = self.inplace
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001  # no compiler, a compile error: the pure path stays
            _warn(f"compiling the ingest modules failed ({type(exc).__name__}: {exc})")
            self.inplace = False  # (build_ext.run leaves it so when it raises)
            for ext in self.extensions:  # a partly built group must not reach a wheel
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            (Path(self.get_ext_fullpath(GROUP + "__mypyc")).parent / "_native.json").unlink(missing_ok=True)
            self.inplace = inplace
            return
        manifest = json.dumps({"sources": SOURCES}, indent=1, sort_keys=True) + "\n"
        self.inplace = False
        targets = {Path(self.get_ext_fullpath(GROUP + "__mypyc")).parent}  # build_lib (what a wheel holds)
        self.inplace = inplace
        if inplace or getattr(self, "editable_mode", False):
            targets.add(ROOT / "ragmon" / "ingest")  # an editable install runs the source tree
        for target in targets:
            target.mkdir(parents=True, exist_ok=True)
            (target / "_native.json").write_text(manifest, encoding="utf-8")


# mypyc type-checks what it compiles, in pip's isolated build environment: without ragmon's
# dependencies (their types are Any there) and so without their stubs. The compiled modules must
# check clean; the modules they import are only read (their errors are the lint's business), and
# what only the stubs decide (an ignore they make necessary, a return of their types) is let pass.
BUILD_CHECKS = ["--follow-imports=silent", "--no-warn-unused-ignores", "--no-warn-return-any",
                "--allow-subclassing-any"]


def _extensions() -> list[object]:
    if pure_requested():
        _warn("the pure-Python switch (ragmon/env.py: PURE_PYTHON) is set")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc is not available")
        return []
    paths = [str(_source(m).relative_to(ROOT)) for m in MODULES]  # type: ignore[union-attr]
    try:
        return list(mypycify(BUILD_CHECKS + paths, opt_level="3", group_name=GROUP))
    except (Exception, SystemExit) as exc:  # noqa: BLE001  # a type error mypyc refuses: the pure path stays
        _warn(f"mypyc could not compile the ingest modules ({type(exc).__name__}: {exc})")
        return []


MODULES = list(_constant(NATIVE, "COMPILED_MODULES"))  # type: ignore[call-overload]
SOURCES = recorded_sources(MODULES)  # before compiling: a source edited meanwhile reads as stale
setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
