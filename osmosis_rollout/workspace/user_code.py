"""Import the user's code: a rollout file, a module, or one object of either (``REF:NAME``).

Every place that runs user code (the entrypoint loader, the plugin's ``--osmosis-policy``,
preflight) imports through here, so a file is imported once per process under one name.

A file ``dir/main.py`` is imported as ``_osmosis_rollout_<digest>.main``, a module of a
synthetic package standing for ``dir``: relative imports (``from .helpers import x``) work,
and ``dir`` is put first on ``sys.path`` so absolute ones (``from helpers import x``) do too.
Errors raised by the user's module propagate unchanged (callers decide whether a
``ModuleNotFoundError`` is fatal); a missing file or a bad reference is an
:class:`~osmosis_rollout.errors.EntrypointError`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from osmosis_rollout.errors import EntrypointError

__all__ = ["import_user_file", "import_user_module", "load_object", "looks_like_file"]


def looks_like_file(target: str, base_dir: Path) -> bool:
    """True when ``target`` names a file (``.py``, a path, or an existing file under ``base_dir``)."""
    return (
        target.endswith(".py") or "/" in target or "\\" in target or (base_dir / target).is_file()
    )


def _package_for(directory: Path) -> str:
    """The synthetic package standing for ``directory`` (created on first use)."""
    digest = hashlib.sha256(str(directory).encode("utf-8")).hexdigest()[:16]
    name = f"_osmosis_rollout_{digest}"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(directory)]
        package.__package__ = name
        spec = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
        spec.submodule_search_locations = [str(directory)]
        package.__spec__ = spec
        sys.modules[name] = package
    return name


def import_user_file(path: Path, *, what: str = "file") -> types.ModuleType:
    """Import the Python file at ``path`` (once per process); its directory goes on ``sys.path``.

    Raises :class:`EntrypointError` (``"<what> not found: <path>"``) when the file is
    missing; whatever the module raises while executing propagates (and the half-imported
    module is dropped).
    """
    if not path.is_file():
        raise EntrypointError(f"{what} not found: {path}")
    resolved = path.resolve()
    name = f"{_package_for(resolved.parent)}.{resolved.stem}"
    cached = sys.modules.get(name)
    if cached is not None:
        return cached
    directory = str(resolved.parent)
    if directory in sys.path:
        sys.path.remove(directory)
    sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise EntrypointError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def import_user_module(name: str, base_dir: Path) -> types.ModuleType:
    """Import module ``name`` with ``base_dir`` on ``sys.path``.

    A module that does not exist at all is an :class:`EntrypointError`; errors raised
    while it executes (a missing dependency included) propagate.
    """
    directory = str(base_dir.resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            # The reference itself is wrong (not a missing dependency of the user's code).
            raise EntrypointError(
                f"{name!r} is neither a file nor an importable module ({exc})"
            ) from None
        raise


def load_object(reference: str, *, base_dir: Path) -> Any:
    """The object ``NAME`` of ``FILE_OR_MODULE:NAME`` (a file is resolved against ``base_dir``).

    Raises :class:`EntrypointError` for a malformed reference, a missing file or module, or
    a missing attribute (listing the module's public names); errors raised by the module
    itself propagate.
    """
    target, sep, attr = reference.rpartition(":")
    if not sep or not target or not attr:
        raise EntrypointError(f"expected MODULE_OR_FILE:NAME, got {reference!r}")
    path = base_dir / target  # an absolute target stays as it is
    if target.endswith(".py") or path.is_file():
        module = import_user_file(path)
    else:
        module = import_user_module(target, base_dir)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in vars(module) if not n.startswith("_"))
            raise EntrypointError(
                f"{target!r} has no attribute {attr!r}; it defines: "
                f"{', '.join(names) or '(nothing)'}"
            )
        obj = getattr(obj, part)
    return obj
