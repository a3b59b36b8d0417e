"""series_get of an ended series is computed once: the snapshot is kept while the series row stays the same, and
computed again when the row changes; what it returns is the snapshot itself, with a fresh as_of."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from aqven.research.series import service as service_module
from aqven.research.series.start import SeriesStartBody
from aqven.research.series.view import snapshot as view_snapshot
from aqven.server.service import ProjectService
from support.series_kit import case_names, write_tiny


def test_an_ended_series_snapshot_is_kept_until_its_row_changes(
    tiny_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 2))
    computed: list[str] = []
    real = view_snapshot

    def counted(s: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        computed.append(s.status)
        return real(s, *args, **kwargs)

    monkeypatch.setattr(service_module, "snapshot", counted)

    async def go() -> None:
        svc = ProjectService(root)
        out = await svc.series.start(SeriesStartBody.model_validate({"experiment_id": "rate", "simulate": True}))
        sid = out["series"]["series_id"]
        snap = await svc.series.get(sid, wait_seconds=30)
        while snap["status"] == "running":
            snap = await svc.series.get(sid, wait_seconds=30)
        assert snap["status"] == "done" and snap["verdict"] is not None
        before = len(computed)
        again = [await svc.series.get(sid) for _ in range(3)]
        assert len(computed) == before  # kept
        for view in again:
            assert {k: v for k, v in view.items() if k != "as_of"} == {k: v for k, v in snap.items() if k != "as_of"}
        assert again[-1]["as_of"] >= snap["as_of"]
        cases = await svc.series.get(sid, include_cases=True)  # another view: computed on its own
        assert "cases" in cases and len(computed) == before + 1
        svc.series.store.update(sid, finding="experiments/rate/findings/x.json")  # the row changed
        changed = await svc.series.get(sid)
        assert changed["finding"] == "experiments/rate/findings/x.json" and len(computed) == before + 2
        await svc.shutdown()

    asyncio.run(go())
