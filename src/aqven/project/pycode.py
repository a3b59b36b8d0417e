"""Load a function from a Python file of the project (code nodes, checks, simulators).

Modules are loaded by file path under a name unique to the project folder, with the project root on
`sys.path` so that a project's modules may import each other (`from sim import world`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from aqven.errors import ProjectError

_lock = threading.Lock()
_cache: dict[tuple[str, float], ModuleType] = {}


def load_module(root: Path, file: Path) -> ModuleType:
    """Import `file` (inside `root`); reloads when the file changed. Errors become `E_CODE_IMPORT`."""
    root = root.resolve()
    file = file.resolve()
    try:
        mtime = file.stat().st_mtime
    except OSError:
        raise ProjectError(
            f"code file {file.name!r} does not exist",
            code="E_FILE_MISSING",
            file=str(file.relative_to(root)) if root in file.parents else str(file),
            hint="create the file or fix the path",
        ) from None
    key = (str(file), mtime)
    with _lock:
        if key in _cache:
            return _cache[key]
        tag = hashlib.sha1(str(root).encode()).hexdigest()[:10]
        relmod = ".".join(file.relative_to(root).with_suffix("").parts)
        name = f"aqven_project_{tag}.{relmod}"
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise ProjectError(f"cannot load {file.name}", code="E_CODE_IMPORT", hint="is it a Python file?")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # the project's own code: any error is reported, never raised through
            raise ProjectError(
                f"importing {file.relative_to(root)} failed: {type(exc).__name__}: {exc}",
                code="E_CODE_IMPORT",
                file=str(file.relative_to(root)),
                line=_line_of(exc, file),
                hint="fix the error in the module; it must import without side effects",
            ) from None
        _cache[key] = module
        return module


def _line_of(exc: BaseException, file: Path) -> int | None:
    if isinstance(exc, SyntaxError):
        return exc.lineno
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def load_function(root: Path, file: Path, name: str) -> Callable[..., Any]:
    module = load_module(root, file)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ProjectError(
            f"{file.name} has no function {name!r}",
            code="E_CODE_FUNCTION_MISSING",
            file=str(file.resolve().relative_to(root.resolve())),
            hint="define the function, or fix the name after the colon",
        )
    return fn  # type: ignore[no-any-return]
