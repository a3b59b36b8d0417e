"""The foundation as a new user meets it: init, check, run through a real server process, restart."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from support.commands import aqven, cli_env, stop_server


def test_init_check_run_simulated(tmp_path: Path) -> None:
    r = aqven("init", "x", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    root = tmp_path / "x"
    try:
        r = aqven("check", cwd=root)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "0 error(s)" in r.stdout
        # A working (dev) case of package x: a held-out one is never run alone (HOLDOUT_HIDDEN, below).
        r = aqven("run", "support_case", "--case", "hub_firmware_update_stuck", "--simulate", cwd=root)
        assert r.returncode == 0, r.stdout + r.stderr
        out = r.stdout
        for expected in ("hub_firmware_update_stuck", "done", "simulated", "draft", "revise", "tokens", "$"):
            assert expected in out, out
        r = aqven("run", "support_case", "--case", "strip_flicker_credit", "--simulate", cwd=root)
        assert r.returncode == 2 and "HOLDOUT_HIDDEN" in r.stdout + r.stderr, r.stdout + r.stderr
        assert "Traceback" not in r.stdout + r.stderr
        assert (root / ".aqven" / "aqven.sqlite").is_file()
        assert json.loads((root / ".aqven" / "server.json").read_text())["port"] > 0
    finally:
        stop_server(root)


def test_missing_key_is_an_infrastructure_error_naming_the_variable(showcase: Path) -> None:
    r = aqven("run", "support_case", "--case", "strip_flicker_credit", cwd=showcase)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "infrastructure error" in r.stdout
    assert "PROVIDER_KEY_MISSING" in r.stdout and "OPENROUTER_API_KEY" in r.stdout


def test_range_run_uses_node_outputs(showcase: Path) -> None:
    r = aqven(
        "run",
        "support_case",
        "--case",
        "strip_flicker_credit",
        "--from",
        "polish",
        "--to",
        "polish",
        "--simulate",
        "--json",
        cwd=showcase,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    record = json.loads(r.stdout)
    assert record["status"] == "done" and record["model_calls"] == 1
    assert set(record["output"]) >= {"reply", "promises"}
    r = aqven(
        "run",
        "support_case",
        "--case",
        "strip_flicker_credit",
        "--from",
        "polish",
        "--to",
        "polish",
        "--simulate",
        cwd=showcase,
    )
    assert "draft" not in r.stdout.split("total:")[0].split("\n", 1)[1], r.stdout


def test_runs_survive_a_server_restart_and_a_second_server_is_refused(showcase: Path) -> None:
    r = aqven("run", "support_case", "--case", "strip_flicker_credit", "--simulate", "--json", cwd=showcase)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["id"]
    r2 = aqven("serve", cwd=showcase, timeout=30)
    assert r2.returncode != 0 and "SERVER_ALREADY_RUNNING" in r2.stderr
    info = json.loads((showcase / ".aqven" / "server.json").read_text())
    os.kill(info["pid"], signal.SIGKILL)
    time.sleep(0.3)
    # server.json is now stale: the next command notices, starts a new server, and the run is still there.
    from aqven.server.client import Client

    client = Client(showcase)
    assert (
        client.port != info["port"]
        or json.loads((showcase / ".aqven" / "server.json").read_text())["pid"] != info["pid"]
    )
    record = client.get(f"/api/runs/{run_id}")
    assert record["status"] == "done" and record["output"]
    events = client.get(f"/api/runs/{run_id}/events")
    assert events[0]["kind"] == "run_start" and events[-1]["kind"] == "run_end"


def test_bad_input_gets_a_clear_error(showcase: Path) -> None:
    r = aqven("run", "support_case", "--input", "{not json", cwd=showcase)
    assert r.returncode == 2 and "VALIDATION_ERROR" in r.stderr and "Traceback" not in r.stderr
    r = aqven("run", "nope", "--case", "strip_flicker_credit", "--simulate", cwd=showcase)
    assert r.returncode == 1 and "FLOW_NOT_FOUND" in r.stderr
    r = aqven(
        "run",
        "support_case",
        "--case",
        "strip_flicker_credit",
        "--from",
        "polish",
        "--to",
        "draft",
        "--simulate",
        cwd=showcase,
    )
    assert r.returncode == 1 and "RANGE_INVALID" in r.stderr
    env = cli_env()
    r = aqven("check", cwd=showcase.parent, env=env)
    assert r.returncode == 2 and "PROJECT_NOT_FOUND" in r.stderr
