"""The compiled ingest modules (``ragmon/ingest/_native.py``): loaded when built, never stale, and
the pure-Python fallback as exact as they are.

* In a normal install on a machine with a C compiler the compiled modules are the ones loaded (a
  silent fallback to pure Python would otherwise hide a broken build).
* An edited source (or one of the ragmon modules a compiled one imports) makes the whole group
  fall back to its ``.py`` files, with a warning; so does a missing build record.
* The exactness tests (fast path against full path, light spans against the full decode) pass with
  ``RAGMON_PURE_PYTHON=1`` too, in a subprocess.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ragmon.ingest import _native

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(_native.__file__).resolve().parents[1]  # the installed ragmon package
PURE = _native.pure_requested()


def _compiler() -> bool:
    command = shlex.split(sysconfig.get_config_var("CC") or "cc")
    return bool(command) and shutil.which(command[0]) is not None


def _is_extension(path: str | None) -> bool:
    return path is not None and path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


needs_compiled = pytest.mark.skipif(PURE or _native.state() != "compiled",
                                    reason="the compiled modules are not loaded here")


def test_the_compiled_modules_run_where_they_can_be_built() -> None:
    modules = [importlib.import_module(name) for name in _native.COMPILED_MODULES]
    if PURE:
        assert _native.state() == f"pure: {_native.PURE_ENV} is set"
        assert not any(_is_extension(m.__file__) for m in modules)
    elif not _compiler():
        pytest.skip("no C compiler: ragmon installs as pure Python here")
    else:
        # a C compiler is here, so `pip install -e .` / `make dev-install` compiled them
        assert _native.state() == "compiled", "rebuild with `make dev-install` (or pip install -e .)"
        assert all(_is_extension(m.__file__) for m in modules), [m.__file__ for m in modules]


def _state_in(root: Path, *modules: str) -> subprocess.CompletedProcess[str]:
    code = ("import importlib, sys; from ragmon.ingest import _native; print(_native.state()); "
            "print(*(importlib.import_module(m).__file__ for m in sys.argv[1:]))")
    env = {k: v for k, v in os.environ.items() if k != _native.PURE_ENV} | {"PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", code, *modules], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120, check=True)


@needs_compiled
def test_an_edited_source_falls_back_to_pure_python(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "ragmon", ignore=shutil.ignore_patterns("__pycache__"))
    modules = ("ragmon.ingest.decode.otlp_proto", "ragmon.ingest.extract._latency")
    state, files = _state_in(tmp_path, *modules).stdout.splitlines()
    assert state == "compiled" and all(_is_extension(f) for f in files.split())

    # a module the compiled ones import (mypyc baked in its constants) changes: all fall back
    values = tmp_path / "ragmon" / "ingest" / "extract" / "_values.py"
    values.write_text(values.read_text() + "\n# edited\n")
    run = _state_in(tmp_path, *modules)
    state, files = run.stdout.splitlines()
    assert state == "pure: stale: ragmon.ingest.extract._values changed since the build"
    assert files.split() == [str(tmp_path / "ragmon" / "ingest" / "decode" / "otlp_proto.py"),
                             str(tmp_path / "ragmon" / "ingest" / "extract" / "_latency.py")]
    assert "compiled ingest modules are stale" in run.stderr  # logged once, as a warning

    (tmp_path / "ragmon" / "ingest" / _native.MANIFEST).unlink()
    assert _state_in(tmp_path).stdout.splitlines()[0] == "pure: stale: no build record (FileNotFoundError)"


@needs_compiled
def test_a_module_of_the_list_not_built_reads_as_stale(tmp_path: Path) -> None:
    """A build of an older module list (a module renamed since): the group falls back and
    ``main`` answers 1, so ``make dev-install`` rebuilds."""
    shutil.copytree(PACKAGE, tmp_path / "ragmon", ignore=shutil.ignore_patterns("__pycache__"))
    for built in (tmp_path / "ragmon" / "ingest" / "decode").glob("proto_wire.*"):
        if _is_extension(str(built)):
            built.unlink()
    run = _state_in(tmp_path)
    assert run.stdout.splitlines()[0] == "pure: stale: ragmon.ingest.decode.proto_wire not built"
    env = {k: v for k, v in os.environ.items() if k != _native.PURE_ENV} | {"PYTHONPATH": str(tmp_path)}
    code = "import sys; from ragmon.ingest._native import main; sys.exit(main())"
    assert subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          timeout=120).returncode == 1


@pytest.mark.timeout(900)
@pytest.mark.skipif(PURE, reason="this run is the pure one")
def test_the_exactness_tests_pass_on_the_pure_path_too() -> None:
    env = os.environ | {_native.PURE_ENV: "1"}
    tests = ["tests/ingest/test_fast_path.py", "tests/ingest/test_otlp_proto.py",
             "tests/ingest/test_native.py::test_the_compiled_modules_run_where_they_can_be_built"]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=840)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and " skipped" not in run.stdout


def test_the_pure_switch_is_read_with_the_one_boolean_parser() -> None:
    for value, expected in (("1", True), (" TRUE ", True), ("yes", True), ("on", True), ("0", False),
                            ("off", False), ("", False), ("maybe", False)):  # unreadable: ignored, logged
        assert _native.pure_requested({_native.PURE_ENV: value}) is expected
    assert _native.pure_requested({}) is False


def test_setup_py_reads_the_switch_with_env_parse_bool() -> None:
    """setup.py cannot import ragmon (its dependencies are not there at build time): it loads
    ragmon/env.py from its file and uses its parser; no other truth table is written anywhere."""
    source = (REPO / "setup.py").read_text()
    assert '"ragmon" / "env.py"' in source and "parse_bool" in source
    for path in [REPO / "setup.py", *sorted((REPO / "ragmon").rglob("*.py"))]:
        if path.name != "env.py":
            assert '"yes", "on"' not in path.read_text(), path
