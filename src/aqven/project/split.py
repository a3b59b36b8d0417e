"""The dev/holdout split: a salted hash of the case name, the same in every clone.

A case is on the working side (dev) when the first 8 bytes of sha256("<package>\\0<case name>"),
read as a big-endian integer, are even; otherwise it is held out. Nobody picks the side.
"""

from __future__ import annotations

import hashlib
from typing import Literal

Side = Literal["dev", "holdout"]


def side_of(package: str, case_name: str) -> Side:
    digest = hashlib.sha256(f"{package}\0{case_name}".encode()).digest()
    return "dev" if int.from_bytes(digest[:8], "big") % 2 == 0 else "holdout"
