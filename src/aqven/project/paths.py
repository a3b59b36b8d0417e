"""Paths inside a project: every file a project names must stay inside the project."""

from __future__ import annotations

from pathlib import Path

from aqven.errors import ProjectError

STATE_DIR = ".aqven"
DB_FILE = "aqven.sqlite"


def inside(root: Path, base: Path, relative: str, *, file: str | None = None, line: int | None = None) -> Path:
    """Resolve `relative` against `base`; refuse absolute paths and paths that leave `root`."""
    if not relative or relative.startswith(("/", "\\")) or (len(relative) > 1 and relative[1] == ":"):
        raise ProjectError(
            f"path {relative!r} must be relative to its folder",
            code="E_PATH_OUTSIDE_PROJECT",
            file=file,
            line=line,
            hint="name files relative to the file that uses them, inside the project",
        )
    try:
        target = (base / relative).resolve()
        root_resolved = root.resolve()
    except (OSError, ValueError, RuntimeError):
        raise ProjectError(
            f"{relative!r} is not a usable path",
            code="E_PATH_INVALID",
            file=file,
            line=line,
            hint="use a short relative path without control characters",
        ) from None
    if target != root_resolved and root_resolved not in target.parents:
        raise ProjectError(
            f"path {relative!r} leaves the project",
            code="E_PATH_OUTSIDE_PROJECT",
            file=file,
            line=line,
            hint="keep prompt, code and data files inside the project folder",
        )
    return target


def within(root: Path, path: Path) -> bool:
    """True when `path`, symlinks followed, is `root` or below it; False when it leaves or cannot be resolved."""
    try:
        target = path.resolve()
        base = root.resolve()
    except (OSError, ValueError, RuntimeError):
        return False
    return target == base or base in target.parents


def listed_name(root: Path, path: Path) -> str:
    """`path` relative to `root` as it was listed (the link's own name, not where it points)."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return rel(root, path)


def link_outside(root: Path, path: Path) -> ProjectError:
    """E_PATH_OUTSIDE_PROJECT for a file or folder found by listing that resolves outside the project."""
    name = listed_name(root, path)
    return ProjectError(
        f"{name!r} leaves the project (a symbolic link to a place outside it); it is not read",
        code="E_PATH_OUTSIDE_PROJECT",
        file=name,
        hint="copy the file into the project instead of linking to it; links that stay inside the project are fine",
    )


def is_file(path: Path) -> bool:
    """`path.is_file()`, but False instead of an error for names the system cannot even look up."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def rel(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (OSError, ValueError, RuntimeError):
        return path.as_posix()


def state_dir(root: Path) -> Path:
    return root / STATE_DIR


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds an `aqven.yaml`."""
    current = start.resolve()
    for folder in (current, *current.parents):
        if (folder / "aqven.yaml").is_file():
            return folder
    return None
