"""A server's long-lived objects are left out of the cyclic collector's full passes (aqven/heap.py).

A full collection scans every tracked object, with the event loop stopped: with the project and a big series'
attempts in it, that took 100–260 ms each time (bench/perf/perf_series_get_live.py). After the server loaded the
project, and after a series' driver read its attempts, what is alive then is frozen (`gc.freeze`).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from aqven.research.series.start import SeriesStartBody
from aqven.server.service import ProjectService
from support.series_kit import case_names, write_tiny


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the next test starts with every object scanned again


def test_the_loaded_project_is_out_of_full_collections(showcase: Path, unfrozen: None) -> None:
    svc = ProjectService(showcase)
    assert gc.get_freeze_count() == 0
    svc.warm()
    assert gc.get_freeze_count() > 10_000  # the loaded project, its schemas and the price table


def test_a_series_driver_freezes_the_attempts_it_read(tiny_env: Path, tmp_path: Path, unfrozen: None) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(30, 0))
    body = SeriesStartBody.model_validate({"experiment_id": "rate", "on": "dev", "simulate": True})

    async def main() -> None:
        svc = ProjectService(root)
        try:
            out = await svc.series.start(body)
            sid = out["series"]["series_id"]
            state = await svc.series.get(sid, wait_seconds=20)
            while state["status"] == "running":
                state = await svc.series.get(sid, wait_seconds=20)
            assert state["status"] == "done"
        finally:
            await svc.shutdown()

    asyncio.run(main())
    assert gc.get_freeze_count() > 0
