"""Kill soak: SIGKILL the project server at random moments of a series, restart it, and check the books.

The soak itself lives in tests/support/kill_soak.py (the reliability tests run a short one); this is its
command line:

    .venv/bin/python bench/soak/soak_kill.py --help
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from support.kill_soak import main

if __name__ == "__main__":
    main()
