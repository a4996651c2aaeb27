"""Load a repository script (bench/, scripts/, deploy/) as a module, to test its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """The script at ``path``, executed anew as the module ``name`` and registered under it in ``sys.modules``
    (dataclasses look their module up by name while the class is built). A test that changes the module's
    constants loads it under a name of its own."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
