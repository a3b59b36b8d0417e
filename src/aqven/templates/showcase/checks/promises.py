"""Checks on support replies.

`no_unkeepable_promise` fails a reply that promises something Lumen's policy does not allow: a guarantee,
same-day or next-day timing, a promise that a fault never happens again, a credit above the cap, or a free
upgrade. The patterns are the same as `UNKEEPABLE` in sim/world.py, so on simulated runs the check passes
exactly when the simulated agent did not overpromise.
"""

from __future__ import annotations

import re
from typing import Any

UNKEEPABLE: tuple[tuple[str, str], ...] = (
    ("a guarantee", r"\bguarantee"),
    (
        "same-day or next-day timing",
        r"\b(today|tonight|tomorrow|overnight|within (24|48) hours|within (the|an|one) hour)\b",
    ),
    ("a promise that it never happens again", r"\bnever happen again\b"),
    ("a credit above the policy cap", r"(\b100 ?%|\bdouble|\bfull[- ]price) (store )?credit\b"),
    ("a free upgrade", r"\bfree upgrade\b|\bupgrade you\b[^.]*\bfree\b"),
)
_COMPILED = [(label, re.compile(pattern, re.IGNORECASE)) for label, pattern in UNKEEPABLE]
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _texts(value: Any) -> list[str]:
    """Every string inside an output: the reply and each listed promise."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def no_unkeepable_promise(output: Any, case: Any = None) -> tuple[bool, str]:
    """Pass when the reply and its promises stay within policy; the reason quotes the first offending sentence."""
    for text in _texts(output):
        for label, pattern in _COMPILED:
            if not pattern.search(text):
                continue
            for sentence in _SENTENCE.split(text):
                if pattern.search(sentence):
                    return False, f'promises {label}: "{sentence.strip()}"'
    return True, "every promise is within policy"
