"""What tells that the project files changed: a fingerprint of their paths, times and sizes.

The server and its worker processes (research/series/worker.py) read the project again when it changes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FINGERPRINT_EVERY_S = 1.0  # how often the project files are looked at for changes
WATCHED = ("aqven.yaml", "agents", "datasets", "flows", "experiments", "checks")

Fingerprint = tuple[tuple[str, float, int], ...]


def fingerprint(root: Path) -> Fingerprint:
    items: list[tuple[str, float, int]] = []
    for name in WATCHED:
        base = root / name
        paths = [base] if base.is_file() else (sorted(base.rglob("*")) if base.is_dir() else [])
        for p in paths:
            if (name == "experiments" and "findings" in p.relative_to(base).parts[1:2]) or "__pycache__" in p.parts:
                continue  # written by the server itself: a new finding is no reason to reload the project
            with contextlib.suppress(OSError):
                st = p.stat()
                items.append((str(p), st.st_mtime, st.st_size))
    return tuple(items)


def tree_fingerprint(root: Path, *, also: tuple[Path, ...] = ()) -> Fingerprint:
    """Paths, times and sizes of every file of the project (its hidden folders, `.aqven/` among them, and
    `__pycache__` aside) and of `also`: what `aqven check` reads from disk, so a result can be kept until one
    changes."""
    items: list[tuple[str, float, int]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__" and d != "node_modules")
        for name in sorted(files):
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(folder, name))
                items.append((os.path.join(folder, name), st.st_mtime, st.st_size))
    for path in also:
        with contextlib.suppress(OSError):
            st = path.stat()
            items.append((str(path), st.st_mtime, st.st_size))
    return tuple(items)
