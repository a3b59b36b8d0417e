"""Code nodes run off the event loop under their `timeout_s`: while a series' code node sleeps, another series'
snapshot answers at once, and the sleeping node ends as CODE_TIMEOUT, an infrastructure error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.series_kit import case_names, client_for, get, settle, start, tiny_environment, wait_until, write_tiny

SLOW_FLOW = """\
input: {text: string}
output: {reply: string}
nodes:
  - id: answer
    kind: code
    code: slow.py:answer
    timeout_s: {timeout}
    inputs: {text: $input.text}
    output: {reply: string}
"""
# Blocks its thread (time.sleep, not await) until the test lets it go, or 30 s at most.
SLOW_PY = """\
import time
from pathlib import Path

RELEASE = Path(__file__).parent / "release"


def answer(text: str) -> dict:
    deadline = time.monotonic() + 30
    while not RELEASE.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"reply": "good"}
"""
SLOW_EXPERIMENT = """\
failure_mode: slow
description: The slow flow answers well.
subject: {flow: slow}
dataset: {id: cases}
checks:
  - id: ok
    function: checks/ok.py:reply_ok
metrics:
  ok: {check: ok}
question: {kind: threshold, metric: ok, bound: 0.5, margin: 0.05}
repeats: 1
"""


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return tiny_environment(monkeypatch, tmp_path)


def project(tmp_path: Path, timeout: float) -> Path:
    return write_tiny(
        tmp_path / "p",
        case_names(2, 2),
        overrides={
            "flows/slow/flow.yaml": SLOW_FLOW.replace("{timeout}", str(timeout)),
            "flows/slow/slow.py": SLOW_PY,
            "experiments/slow/experiment.yaml": SLOW_EXPERIMENT,
        },
    )


def test_a_sleeping_code_node_delays_no_other_series_and_times_out(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path, timeout=2.0)
    try:
        with client_for(root) as client:
            other = start(client, experiment_id="rate", on="dev", simulate=True)["series"]["series_id"]
            assert settle(client, other)["status"] == "done"
            slow = start(client, experiment_id="slow", on="dev", simulate=True)["series"]["series_id"]
            wait_until(lambda: get(client, slow)["progress"]["running"] > 0)
            # The slow node holds its thread for its whole timeout; the loop answers meanwhile.
            worst = 0.0
            while get(client, slow)["progress"]["done"] == 0:
                t0 = time.perf_counter()
                assert get(client, other)["status"] == "done"
                worst = max(worst, time.perf_counter() - t0)
                time.sleep(0.05)
            assert worst < 1.0, f"a snapshot took {worst:.2f} s while the code node slept"
            snap = settle(client, slow, include_cases=True)
            assert snap["status"] == "failed" and snap["error"]["code"] == "CODE_TIMEOUT"
            codes = {a["error"] for row in snap["cases"] for v in row["variants"].values() for a in v["attempts"]}
            assert codes == {"CODE_TIMEOUT"}
            assert snap["progress"]["infra_errors"] == snap["progress"]["attempts"] == 2
    finally:
        (root / "flows/slow/release").touch()  # lets the abandoned calls return
