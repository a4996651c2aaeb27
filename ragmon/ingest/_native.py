"""The compiled ingest path (mypyc) and its pure-Python fallback.

The latency-only Kafka path spends its time in a few modules (``COMPILED_MODULES``). When ragmon is
installed with a C compiler at hand, ``setup.py`` compiles them with mypyc, unchanged: the ``.py``
files stay the reference and the fallback. A compiled module shadows its ``.py`` (Python imports
an extension before a source file), so ``install()`` — run by ``ragmon/ingest/__init__.py`` before
any of them is imported — decides once per process which to load:

* compiled, when every compiled module is there and its source, and that of every ragmon module
  it imports (mypyc bakes in their constants and signatures), still has the SHA-256 the build
  recorded (``_native.json``, written next to the extensions);
* pure Python otherwise: no compiled modules (no compiler when installed, or never built), or a
  source edited since the build, or a module of the list not built (the list changed since: an
  editable install's stale extension would silently run old code; logged once as a warning,
  ``make dev-install`` rebuilds), or ``RAGMON_PURE_PYTHON`` true
  (``env.parse_bool``: forces the pure path, e.g. to compare both; a value it cannot read is
  logged and ignored).

It is all or nothing: compiled modules call each other's native functions and classes directly, so
a compiled one must never see a pure one of the group. ``state()`` says which path runs and why;
``main()`` prints it and returns 1 when the build is stale (the Makefile rebuilds then).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

from ..env import PURE_PYTHON, parse_bool, read

__all__ = ["COMPILED_MODULES", "MANIFEST", "PURE_ENV", "install", "main", "pure_requested", "source_hashes", "state"]

log = logging.getLogger(__name__)

#: the modules setup.py compiles (it reads this tuple without importing ragmon)
COMPILED_MODULES = (
    "ragmon.ingest.decode.otlp_proto",  # the protobuf reader ...
    "ragmon.ingest.decode.proto_wire",  # ... and the wire format it reads
    "ragmon.ingest.extract._span_view",  # the span view it makes
    "ragmon.ingest.assembler",  # the trace-id window ...
    "ragmon.ingest.closed_trace",  # ... and what it closes
    "ragmon.ingest.extract._latency",  # the latency-only view of a trace
    "ragmon.ingest.extract._latency_docs",
    "ragmon.ingest.extract._view",
    "ragmon.ingest.extract._values",
    "ragmon.ingest.tally",
    "ragmon.ingest.kafka.offsets",
)
#: {"sources": {module: sha256}}: the compiled modules and every ragmon module they import (setup.py)
MANIFEST = "_native.json"
PURE_ENV = PURE_PYTHON  # (named in env.py)
_ROOT = Path(__file__).resolve().parent.parent.parent  # where the "ragmon" package lives


def source_hashes(root: Path, modules: Sequence[str]) -> dict[str, str]:
    """SHA-256 of each module's source under ``root`` (what the build records; a package's is its
    ``__init__.py``); a module without a source is left out."""
    hashes = {}
    for name in modules:
        base = root / name.replace(".", "/")
        for path in (base.with_name(base.name + ".py"), base / "__init__.py"):
            if path.is_file():
                hashes[name] = hashlib.sha256(path.read_bytes()).hexdigest()
                break
    return hashes


def state() -> str:
    """``"compiled"``, or ``"pure: <why>"`` (``install()`` has run on import of ``ragmon.ingest``)."""
    return install()


@functools.cache  # decided once per process
def install() -> str:
    """Decide the path once; route the modules to their ``.py`` when the pure path is taken."""
    reason = _pure_reason()
    if reason is not None and any(_extension(name) for name in COMPILED_MODULES):
        # an extension is there but must not run: import every module of the group from source
        sys.meta_path.insert(0, _SourceFirst(frozenset(COMPILED_MODULES)))
        if reason.startswith("stale"):
            log.warning("ragmon: compiled ingest modules are stale (%s); using the pure-Python path "
                        "(rebuild: make dev-install, or pip install -e .)", reason)
    return "compiled" if reason is None else f"pure: {reason}"


def pure_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``RAGMON_PURE_PYTHON`` asks for the pure path (``env.parse_bool``; unset or unreadable: no)."""
    value = read(PURE_ENV, environ)
    if value is None:
        return False
    try:
        return parse_bool(value)
    except ValueError:
        log.warning("ragmon: %s=%r is not a boolean (1/true/yes/on, 0/false/no/off); ignored", PURE_ENV, value)
        return False


def _pure_reason() -> str | None:
    if pure_requested():
        return f"{PURE_ENV} is set"
    missing = [name for name in COMPILED_MODULES if _extension(name) is None]
    if len(missing) == len(COMPILED_MODULES):
        return "not compiled"
    if missing:  # a build of another module list (one was renamed or added since): rebuild
        return f"stale: {', '.join(missing)} not built"
    try:
        recorded = json.loads((Path(__file__).parent / MANIFEST).read_text())["sources"]
        current = source_hashes(_ROOT, list(recorded))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"stale: no build record ({type(exc).__name__})"
    changed = [name for name in (*COMPILED_MODULES, *recorded) if current.get(name, "?") != recorded.get(name)]
    if changed:
        return f"stale: {', '.join(dict.fromkeys(changed))} changed since the build"
    return None


def _extension(name: str) -> Path | None:
    """The compiled file of module ``name``, if one sits next to its source."""
    base = _ROOT / name.replace(".", "/")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if base.with_name(base.name + suffix).is_file():
            return base.with_name(base.name + suffix)
    return None


class _SourceFirst:
    """A meta path finder that loads the named modules from their ``.py`` files."""

    def __init__(self, names: frozenset[str]) -> None:
        self._names = names

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name not in self._names:
            return None
        source = _ROOT / (name.replace(".", "/") + ".py")
        if not source.is_file():
            return None
        loader = importlib.machinery.SourceFileLoader(name, str(source))
        return importlib.util.spec_from_file_location(name, source, loader=loader)


def main() -> int:
    """Print the path; 1 when the compiled modules are stale (``make dev-install`` rebuilds then)."""
    print(state())  # noqa: T201  # a command line's answer
    return 1 if state().startswith("pure: stale") else 0
