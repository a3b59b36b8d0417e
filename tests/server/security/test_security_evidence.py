"""Evidence that bends: what an agent that wants a "confirmed" (and reads every file, edits files, has the token)
tried after issue 12, reproduced, and seen to fail.

- the simulator edited for a few seconds and put back while a simulated held-out series runs: outcomes changed,
  yet every attempt recorded one inputs hash (the workspace's, which a simulator edit does not reload) and a
  finding was written → the code files are hashed as they run, the series is `invalid`, no finding;
- a made-up finding for a series that never ran, sealed with the key read from `.aqven/` (test_findings_sealed.py);
- a code node that outputs an agent's custom `api_key_env` key (test_security_robust.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aqven.research.experiments.inputs import attempt_inputs_hash, series_manifest
from aqven.research.experiments.workspace import Workspace
from aqven.store.series_records import SeriesPlan
from support.series_kit import (
    SIM_PY,
    attempts,
    case_names,
    client_for,
    rows,
    run_order,
    start,
    wait_until,
    write_tiny,
)
from support.series_kit import settle as settle_rest

# What the agent writes into sim/agents.py for a while: every reply is "bad", so every check fails.
ALL_BAD = SIM_PY.replace('reply = "bad" if "fail" in case else', 'reply = "bad" if True else')


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_simulator_edited_and_put_back_during_a_series_makes_it_invalid(
    tiny_env: Path, hold: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    """Attempts run in the server (1) or in its worker processes (2): each computes the hash it ran on."""
    assert ALL_BAD != SIM_PY
    monkeypatch.setenv("TINY_WORKERS", workers)
    root = write_tiny(tmp_path / "tiny", case_names(2, 30), concurrency=2)
    sim = root / "sim" / "agents.py"
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        order = run_order(root, sid)
        for case in order[:5]:
            (hold / case).touch()
        wait_until(lambda: sum(a["status"] == "done" for a in attempts(root, sid)) >= 5)
        sim.write_text(ALL_BAD)  # no reload of the workspace follows: sim/ is not a watched folder
        for case in order[5:12]:
            (hold / case).touch()
        wait_until(lambda: sum(a["status"] == "done" for a in attempts(root, sid)) >= 12)
        sim.write_text(SIM_PY)  # put back before the series ends
        time.sleep(0.05)
        (hold / "open").touch()
        snap = settle_rest(client, sid)
    done = attempts(root, sid)
    assert sum(a["outcome"] == "fail" for a in done) >= 1  # the edit changed what the simulator answered
    assert snap["status"] == "done"
    assert snap["verdict"]["verdict"] == "invalid" and snap["verdict"]["reason"] == "inputs_changed"
    assert snap["finding"] is None and not (root / "experiments" / "rate" / "findings").exists()
    series_hash = rows(root, "SELECT inputs_hash FROM series WHERE id=?", (sid,))[0]["inputs_hash"]
    failed = [a["inputs_hash"] for a in done if a["outcome"] == "fail"]
    assert failed and series_hash not in failed  # every attempt that ran the edited code says so
    assert sim.read_text() == SIM_PY


def test_a_live_series_hash_never_depends_on_simulator_files(tiny_env: Path, tmp_path: Path) -> None:
    """Simulators run only in simulated mode: a live series' inputs (manifest and per-attempt hash) stay the same
    when a simulator file changes; a simulated one's change."""
    root = write_tiny(tmp_path / "tiny", case_names(2, 2))
    names = case_names(2, 2)
    plan = SeriesPlan(flow_id="answer", dataset_id="cases", cases=names, variants=["as_written"], repeats=1)
    ws = Workspace.load(root)

    def now(simulated: bool) -> tuple[dict[str, str], str]:
        variants = ["as_written"]
        manifest = series_manifest(ws, flow_id="answer", variants=variants, experiment_id="rate", simulated=simulated)
        return manifest, attempt_inputs_hash(ws, f"s{simulated}", plan, "rate", simulated=simulated)

    live, simulated = now(False), now(True)
    assert "sim/agents.py" not in live[0] and "sim/agents.py" in simulated[0]
    (root / "sim" / "agents.py").write_text(ALL_BAD)
    assert now(False) == live
    assert now(True)[0]["sim/agents.py"] != simulated[0]["sim/agents.py"] and now(True)[1] != simulated[1]
    (root / "sim" / "agents.py").write_text(SIM_PY)  # put back: the same content, the same hash
    assert now(True) == simulated
