"""Load a function from a Python file of the project (code nodes, checks, simulators).

Modules are loaded by file path under a name unique to the project folder, with the project root on
`sys.path` so that a project's modules may import each other (`from sim import world`).

A reference to a function is `path/to/file.py:function` (relative to the folder of the file that
names it) or, for simulators and checks, also the module form `package.module:function`
(relative to the project root).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from aqven.errors import ProjectError

_lock = threading.Lock()
_cache: dict[tuple[str, int, int], ModuleType] = {}

_FILE_REF = re.compile(r"^(?P<file>[^:]+\.py):(?P<fn>[A-Za-z_][A-Za-z0-9_]*)$")
_MODULE_REF = re.compile(
    r"^(?P<mod>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):(?P<fn>[A-Za-z_][A-Za-z0-9_]*)$"
)


def parse_ref(ref: str, *, module_form: bool = False) -> tuple[str, str]:
    """Split `file.py:function` (or `pkg.module:function` when `module_form`) into a relative path and a name.

    Raises ValueError when `ref` is neither.
    """
    m = _FILE_REF.match(ref)
    if m:
        return m.group("file"), m.group("fn")
    m = _MODULE_REF.match(ref) if module_form else None
    if m:
        return m.group("mod").replace(".", "/") + ".py", m.group("fn")
    forms = "'path/file.py:function' or 'package.module:function'" if module_form else "'file.py:function'"
    raise ValueError(f"a function is named {forms}; got {ref!r}")


def _rel(root: Path, file: Path) -> str:
    try:
        return file.relative_to(root).as_posix()
    except ValueError:
        return str(file)


@functools.lru_cache(maxsize=1024)
def _real(path: Path) -> Path:
    """`path.resolve()`, once per process: a simulator or check is loaded on every attempt, and resolving walks
    the path with a system call per part. A symlink retargeted later is not seen (the file's edits are: the
    module is keyed by its size and mtime)."""
    return path.resolve()


def load_module(root: Path, file: Path) -> ModuleType:
    """Import `file` (inside `root`); reloads when the file changed. Errors become `E_CODE_IMPORT`."""
    root = _real(root)
    file = _real(file)
    try:
        stat = file.stat()
    except (OSError, ValueError):
        raise ProjectError(
            f"code file {file.name!r} does not exist",
            code="E_FILE_MISSING",
            file=_rel(root, file),
            hint="create the file or fix the path",
        ) from None
    key = (str(file), stat.st_mtime_ns, stat.st_size)
    with _lock:
        if key in _cache:
            return _cache[key]
        tag = hashlib.sha1(str(root).encode()).hexdigest()[:10]
        relmod = "_".join("".join(c if c.isalnum() else "_" for c in part) for part in Path(_rel(root, file)).parts)
        name = f"aqven_project_{tag}_{relmod}"
        _activate(root)
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise ProjectError(
                f"cannot load {file.name}", code="E_CODE_IMPORT", file=_rel(root, file), hint="is it a Python file?"
            )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and typing look the module up while it runs
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # the project's own code: any error is reported, never raised through
            sys.modules.pop(name, None)
            raise ProjectError(
                f"importing {_rel(root, file)} failed: {type(exc).__name__}: {exc}",
                code="E_CODE_IMPORT",
                file=_rel(root, file),
                line=_line_of(exc, file),
                hint="fix the error in the module; it must import without side effects",
            ) from None
        _cache[key] = module
        return module


_active_root: list[Path] = []


def _activate(root: Path) -> None:
    """Put `root` first on sys.path; forget modules a previously active project imported by plain name.

    A server serves one project, but tests load several in one process: without this, `from sim import
    world` in a second project would get the first project's `sim`.
    """
    if _active_root and _active_root[0] != root:
        old = _active_root[0]
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if file and not name.startswith("aqven_project_") and old in Path(file).resolve().parents:
                del sys.modules[name]
        if str(old) in sys.path:
            sys.path.remove(str(old))
    if str(root) in sys.path:
        sys.path.remove(str(root))
    sys.path.insert(0, str(root))
    _active_root[:] = [root]


def _line_of(exc: BaseException, file: Path) -> int | None:
    if isinstance(exc, SyntaxError):
        return exc.lineno
    tb = exc.__traceback__
    line = None
    while tb is not None:
        try:
            if Path(tb.tb_frame.f_code.co_filename).resolve() == file:
                line = tb.tb_lineno
        except (OSError, ValueError):
            pass
        tb = tb.tb_next
    return line


def load_function(root: Path, file: Path, name: str) -> Callable[..., Any]:
    module = load_module(root, file)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ProjectError(
            f"{file.name} has no function {name!r}",
            code="E_CODE_FUNCTION_MISSING",
            file=_rel(root.resolve(), file.resolve()),
            hint="define the function, or fix the name after the colon",
        )
    return fn  # type: ignore[no-any-return]
