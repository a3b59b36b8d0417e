"""The terminal as a person meets it (the README followed literally): Ctrl-C during `aqven series` says that the
series keeps running and how to follow or cancel it; `aqven series list` and `follow`; `aqven server status` and
`stop`, and the line a command prints when it leaves a server running; the exit codes of cancel and stop; hints
that name CLI commands; a paused series that says what finishing costs; `aqven look` with a short trace.

Real commands and a real server process, on the tiny project's simulated writer ($0.01 a call). `TINY_HOLD` holds
every attempt until the test opens it, so a series is still running when the test presses Ctrl-C.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from aqven.server.lifecycle import pid_alive
from support.commands import aqven, cli_env, stop_server
from support.series_kit import case_names, first_on, prices_json, write_tiny

INTERRUPTED = 130


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], Path]]:
    """The tiny project (4 working and 4 held-out cases), the command's environment, and TINY_HOLD's folder."""
    root = write_tiny(tmp_path / "tiny", case_names(4, 4), cap="1.00")
    prices = tmp_path / "prices.json"
    prices.write_text(prices_json())
    hold = tmp_path / "hold"
    hold.mkdir()
    env = cli_env(AQVEN_PRICES_FILE=str(prices), TINY_HOLD=str(hold))
    yield root, env, hold
    stop_server(root)


def _start(args: list[str], root: Path, env: dict[str, str], *, tty: bool) -> tuple[subprocess.Popen[bytes], int]:
    """`aqven ARGS` in a child: on a pseudo-terminal (stdin, stdout and stderr), or with pipes (no terminal)."""
    if tty:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "aqven", *args], cwd=root, env=env, stdin=follower, stdout=follower, stderr=follower
        )
        os.close(follower)
        return proc, leader
    proc = subprocess.Popen(
        [sys.executable, "-m", "aqven", *args],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.fileno()


def _read_until(fd: int, out: bytearray, marker: bytes, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while marker not in out:
        assert time.monotonic() < deadline, f"no {marker!r} in: {out.decode(errors='replace')}"
        ready, _w, _x = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk


def _finish(proc: subprocess.Popen[bytes], fd: int, out: bytearray, answer: bytes | None = None) -> int:
    """Read until the command ends (answering its question with `answer`), and its exit code."""
    asked = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _w, _x = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if answer is not None and not asked and b"[y/N]" in out:
                os.write(fd, answer + b"\n")
                asked = True
        elif proc.poll() is not None:
            break
    return proc.wait(timeout=30)


def _series(root: Path, env: dict[str, str]) -> list[dict[str, object]]:
    r = aqven("series", "list", "--json", cwd=root, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows: list[dict[str, object]] = json.loads(r.stdout)
    return rows


def test_ctrl_c_says_the_series_keeps_running_and_follow_waits_for_it(
    tiny: tuple[Path, dict[str, str], Path],
) -> None:
    root, env, hold = tiny
    proc, fd = _start(["series", "rate", "--simulate"], root, env, tty=False)
    out = bytearray()
    _read_until(fd, out, b"series ser_")
    time.sleep(0.5)  # waiting on the server now
    proc.send_signal(signal.SIGINT)
    code = _finish(proc, fd, out)
    text = out.decode(errors="replace")
    [row] = _series(root, env)
    sid = row["series_id"]
    assert code == INTERRUPTED, text
    assert f"interrupted: series {sid} keeps running on the project server (status running, spent" in text, text
    assert "of its $1.00 cap" in text and f"aqven series follow {sid}" in text and f"aqven cancel {sid}" in text
    assert "[y/N]" not in text, "without a terminal nothing is asked"
    assert row["status"] == "running"  # Ctrl-C stopped the waiting, not the series

    # Follow it again: it waits, and ends as `aqven series` ends (done: exit 0).
    follower = subprocess.Popen(
        [sys.executable, "-m", "aqven", "series", "follow", str(sid)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    assert follower.poll() is None, "follow waits while the series runs"
    (hold / "open").touch()
    stdout, stderr = follower.communicate(timeout=60)
    assert follower.returncode == 0, stdout + stderr
    assert f"series {sid}: rate on dev" in stdout and "spent $0.040000 of $1.00" in stdout, stdout
    assert "Signal" in stdout, stdout


def test_ctrl_c_at_a_terminal_offers_to_cancel(tiny: tuple[Path, dict[str, str], Path]) -> None:
    root, env, _hold = tiny
    proc, fd = _start(["series", "rate", "--simulate"], root, env, tty=True)
    out = bytearray()
    try:
        _read_until(fd, out, b"series ser_")
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        code = _finish(proc, fd, out, answer=b"y")
    finally:
        os.close(fd)
    text = out.decode(errors="replace")
    assert code == INTERRUPTED, text
    assert "keeps running on the project server" in text and "[y/N]" in text, text
    assert "cancelled: series" in text, text
    [row] = _series(root, env)
    assert row["status"] == "cancelled"


def test_series_list_follow_and_the_hints_name_cli_commands(tiny: tuple[Path, dict[str, str], Path]) -> None:
    root, env, hold = tiny
    (hold / "open").touch()
    r = aqven("series", "rate", "--cases", "2", "--simulate", "--json", cwd=root, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    sid = json.loads(r.stdout.strip().splitlines()[-1])["series_id"]

    r = aqven("series", "list", cwd=root, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    [line] = [ln for ln in r.stdout.splitlines() if sid in ln]
    for expected in ("rate", "dev", "done", "signal", "$0.020000 of $1.00"):
        assert expected in line, line
    [row] = _series(root, env)
    assert (row["series_id"], Decimal(str(row["spend_usd"])), row["cap_usd"], row["on"]) == (
        sid,
        Decimal("0.02"),
        "1.00",
        "dev",
    )
    r = aqven("series", "list", "--experiment", "pair", "--json", cwd=root, env=env)
    assert r.returncode == 0 and json.loads(r.stdout) == []

    r = aqven("series", "follow", sid, cwd=root, env=env)
    assert r.returncode == 0 and "Signal" in r.stdout, r.stdout + r.stderr
    r = aqven("series", "follow", "ser_nope", cwd=root, env=env)
    assert r.returncode == 1 and "SERIES_NOT_FOUND" in r.stderr and "`aqven series list`" in r.stderr, r.stderr
    assert "/api/" not in r.stderr and "series_start" not in r.stderr

    # `list` and `follow` are sub-commands: an experiment of that name runs with -- before it, and says so.
    r = aqven("series", "list", "--cases", "2", cwd=root, env=env)
    assert r.returncode == 2 and "aqven series -- list --cases 2" in r.stdout + r.stderr, r.stdout + r.stderr
    r = aqven("series", "--", "list", "--simulate", cwd=root, env=env)
    assert r.returncode == 1 and "EXPERIMENT_NOT_FOUND: no experiment 'list'" in r.stderr, r.stderr

    r = aqven("run", "answer", "--case", "no_such_case", "--simulate", cwd=root, env=env)
    assert r.returncode == 1 and "CASE_NOT_FOUND" in r.stderr, r.stdout + r.stderr
    assert "`aqven dataset cases DATASET`" in r.stderr and "/api/" not in r.stderr, r.stderr
    r = aqven("dataset", "cases", "cases", cwd=root, env=env)
    assert r.returncode == 0 and "4 working (dev) case(s); 4 held-out case(s), not listed" in r.stdout, r.stdout


def test_server_status_stop_and_the_line_a_command_leaves(tiny: tuple[Path, dict[str, str], Path]) -> None:
    root, env, _hold = tiny
    r = aqven("server", "status", cwd=root, env=env)
    assert r.returncode == 1 and "no server running" in r.stdout, r.stdout + r.stderr
    r = aqven("server", "stop", cwd=root, env=env)
    assert r.returncode == 0 and "no server running" in r.stdout, r.stdout + r.stderr

    r = aqven("series", "list", cwd=root, env=env)  # starts the server
    assert r.returncode == 0, r.stdout + r.stderr
    info = json.loads((root / ".aqven" / "server.json").read_text())
    pid, port = info["pid"], info["port"]
    line = f"the project server keeps running in the background (pid {pid}, port {port}): `aqven server stop` stops it"
    assert r.stderr.count(line) == 1, r.stderr
    r = aqven("series", "list", cwd=root, env=env)  # it ran already: nothing to say
    assert "keeps running in the background" not in r.stderr, r.stderr

    r = aqven("server", "status", cwd=root, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"pid {pid}, port {port}" in r.stdout and "aqven.sqlite" in r.stdout and "version" in r.stdout
    r = aqven("server", "status", "--json", cwd=root, env=env)
    status = json.loads(r.stdout)
    assert (status["running"], status["pid"], status["port"]) == (True, pid, port)
    assert "token" not in status and info["token"] not in r.stdout

    r = aqven("server", "stop", cwd=root, env=env)
    assert r.returncode == 0 and f"stopped the project server (pid {pid}, port {port})" in r.stdout, r.stdout
    assert not pid_alive(pid) and not (root / ".aqven" / "server.json").exists()
    r = aqven("server", "status", cwd=root, env=env)
    assert r.returncode == 1 and "no server running" in r.stdout


def test_cancel_and_stop_that_succeed_exit_0_and_a_pause_says_what_finishing_costs(
    tmp_path: Path,
) -> None:
    # Ten working cases at $0.01 an attempt under a $0.05 cap: the series pauses near its cap, having spent some.
    names = case_names(10, 2)
    root = write_tiny(tmp_path / "tiny", names, cap="0.05", concurrency=1)
    prices = tmp_path / "prices.json"
    prices.write_text(prices_json())
    env = cli_env(AQVEN_PRICES_FILE=str(prices))
    try:
        r = aqven("series", "rate", "--simulate", cwd=root, env=env)
        assert r.returncode == 3, r.stdout + r.stderr
        sid = next(w for w in r.stdout.split() if w.startswith("ser_")).rstrip(":")
        assert "is waiting for approval (spend_near_cap): spent $0.040000 of its $0.050000 cap" in r.stdout, r.stdout
        assert "finishing its 6 attempts left would cost about $0.060000 more, $0.100000 in all" in r.stdout, r.stdout
        assert "a cap of $0.13 lets it finish (its cap is $0.050000)" in r.stdout, r.stdout
        assert "price: no estimate yet" in r.stderr or "price: about $" in r.stderr, r.stderr  # before it runs
        # both amounts, each named with what it buys (issue 29), as Studio offers them
        assert f"aqven approve {sid} --cap 0.13    $0.13: enough to finish" in r.stdout, r.stdout
        assert f"aqven approve {sid}               $0.10 (double): pauses again after about" in r.stdout, r.stdout

        r = aqven("cancel", sid, cwd=root, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Invalid" in r.stdout and "cancelled" in r.stdout.lower()
        r = aqven("cancel", sid, cwd=root, env=env)  # already stopped: a conflict
        assert r.returncode == 1 and "SERIES_STATE_CONFLICT" in r.stderr, r.stdout + r.stderr

        r = aqven("series", "rate", "--simulate", "--json", cwd=root, env=env)
        assert r.returncode == 3, r.stdout + r.stderr
        sid2 = json.loads(r.stdout.strip().splitlines()[-1])["series_id"]
        r = aqven("stop", sid2, "--yes", cwd=root, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        stop_server(root)


def test_look_shows_each_working_case_with_a_short_trace(tiny: tuple[Path, dict[str, str], Path]) -> None:
    root, env, hold = tiny
    (hold / "open").touch()
    dev, held = first_on("dev", "c"), first_on("holdout", "c")
    root = write_tiny(root, [*case_names(4, 4), dev, held])
    r = aqven("look", "answer", "--dataset", "cases", "--case", dev, "--case", held, "--simulate", cwd=root, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"case {dev} · run run_" in r.stdout, r.stdout
    assert "node answer (llm) done" in r.stdout and "test/priced" in r.stdout, r.stdout
    assert "1000/0 tokens · $0.010000" in r.stdout, r.stdout
    assert held not in r.stdout and "1 held-out case(s) ran but are not listed one by one" in r.stdout, r.stdout
