"""What tells that the project files changed: a fingerprint of their paths, times and sizes.

The server and its worker processes (research/series/worker.py) read the project again when it changes.
"""

from __future__ import annotations

import contextlib
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
