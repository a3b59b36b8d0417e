"""A process's long-lived objects, kept out of the cyclic garbage collector's full passes.

A project server holds the loaded project and, for a big series, the rows of the attempts it resumed from (100,000
of them). A full collection (generation 2) scans every tracked object, with the event loop stopped: over a
server's start, the resume of a 100,000-attempt series and its last 6,000 attempts, ten of them took 25–231 ms
each, and a series_get that met one took that much longer (bench/perf/perf_series_get_live.py); with the heap settled
after the resume, the ones after it took 3–71 ms. `settle()` moves what is alive now to
the collector's permanent generation (`gc.freeze`): it is still freed when its last reference goes (reference
counting), only never scanned again. A process calls it where it has just built what it keeps: the server once it
loaded the project, a series' driver once it read the series' attempts, a worker once it loaded the project.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Leave what is alive now out of later full collections (young garbage is collected first, so little of
    what is frozen is garbage that only the cyclic collector would free)."""
    gc.collect(1)
    gc.freeze()
