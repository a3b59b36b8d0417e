"""Fault soak: a live series against a fake provider that injects every provider fault at ~10%.

The soak itself lives in tests/support/fault_soak.py (the reliability tests run a short one); this is its
command line:

    .venv/bin/python bench/soak/soak_faults.py --help
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from support.fault_soak import main

if __name__ == "__main__":
    main()
