"""The environment variables an agent names as holding its key (`api_key_env: MY_COMPANY_KEY`).

Their values are masked wherever the providers' own key variables are (`models/outcomes.secret_values`: outputs,
errors, events, attempts, the server's and its workers' output). Every project this process loads adds its agents'
names, an agent file that does not validate included (its code may still print the variable), and a name is never
forgotten: a run of an earlier load may still echo the key after the agent is gone.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_lock = threading.Lock()
_named: frozenset[str] = frozenset()


def remember(names: Iterable[Any]) -> None:
    """Add the variables named (anything that is not a variable name is skipped)."""
    global _named
    found = {n for n in names if isinstance(n, str) and _NAME.fullmatch(n)}
    if found <= _named:
        return
    with _lock:
        _named = _named | found


def named() -> frozenset[str]:
    """Every key variable an agent of a project loaded in this process named (read without a lock: the set is
    replaced, never changed)."""
    return _named
