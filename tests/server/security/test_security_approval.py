"""Approval stays a person's act, every approval says how it was given, and a raised project cap waits for a person.

* Every approval and stop is recorded with the channel its credential proves: the person key over REST (what
  `aqven approve` sends) → `terminal`, a Studio session (with its CSRF token) → `studio`, `aqven approve` / `aqven
  stop` → `terminal` with `tty` (a person answered at a terminal, driven here through a real pseudo-terminal) or
  `--yes` (no terminal: refused without the flag). The snapshot and the finding carry them.
* The agent's server token approves, stops and confirms nothing, whatever headers it sends (403
  `PERSON_REQUIRED`), and no MCP tool does it.
* Raising `research.spend_cap_usd` in aqven.yaml gives the next series the confirmed cap, and the launch plan,
  the snapshot and GET /api/project say the file asks for more, until a person confirms (REST, `aqven cap
  confirm`); lowering takes effect at once.
* Caps are plain decimals with ≤ 6 decimals, > 0 and ≤ $1,000,000, nothing around them; `1e999999999` on approve
  is a 422, not a series left running, and `" 1"` is refused in every place a cap is read.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from aqven.errors import AqvenError
from aqven.people import load, person_key
from aqven.research.diagnostics.workspace import check_workspace
from aqven.research.launch.caps import parse_cap
from support.commands import aqven, cli_env, stop_server
from support.person import person_headers, studio_login
from support.series_kit import case_names, client_for, get, settle, start, wait_until, write_tiny


def aqven_yaml_cap(root: Path, cap: str, client: Any = None) -> None:
    """Edit aqven.yaml's project cap; with `client`, wait until the server has reloaded the project."""
    path = root / "aqven.yaml"
    text = path.read_text()
    old = text.split('spend_cap_usd: "', 1)[1].split('"', 1)[0]
    path.write_text(text.replace(f'spend_cap_usd: "{old}"', f'spend_cap_usd: "{cap}"'))
    if client is not None:
        wait_until(lambda: client.get("/api/project").json().get("project_cap_asked_usd") == cap, timeout=20)


def test_every_approval_and_stop_records_its_channel(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 2))
    with client_for(root) as client:
        rest = start(client, experiment_id="rate", simulate=True, cap_usd="3.00")["series"]["series_id"]
        assert get(client, rest)["status"] == "awaiting_approval" and get(client, rest)["approvals"] == []
        r = client.post(f"/api/series/{rest}/approve", json={})  # the agent's token
        assert r.status_code == 403 and r.json()["error"]["code"] == "PERSON_REQUIRED"
        r = client.post(f"/api/series/{rest}/approve", json={}, headers=person_headers())
        assert r.status_code == 200, r.text
        [approval] = r.json()["approvals"]
        assert approval["action"] == "approve" and approval["channel"] == "terminal" and approval["person"]
        assert (approval["old_cap_usd"], approval["new_cap_usd"], approval["reason"]) == (
            "3.00",
            "3.00",
            "cap_above_project",
        )
        assert approval["at"].startswith(time.strftime("%Y-", time.gmtime()))
        assert settle(client, rest)["status"] == "done"
        assert get(client, rest)["approvals"] == [approval]  # it stays with the series

        studio = start(client, experiment_id="rate", simulate=True, cap_usd="2.00")["series"]["series_id"]
        headers = studio_login(client)
        missing_csrf = {k: v for k, v in headers.items() if k != "X-CSRF-Token"}
        r = client.post(f"/api/series/{studio}/approve", json={"cap_usd": "2.50"}, headers=missing_csrf)
        assert r.status_code == 403 and r.json()["error"]["code"] == "CSRF_REFUSED"
        r = client.post(f"/api/series/{studio}/approve", json={"cap_usd": "2.50"}, headers=headers)
        assert r.status_code == 200, r.text
        assert [(a["channel"], a["old_cap_usd"], a["new_cap_usd"]) for a in r.json()["approvals"]] == [
            ("studio", "2.00", "2.50")
        ]
        settle(client, studio)

        stopped = start(client, experiment_id="rate", simulate=True, cap_usd="2.00")["series"]["series_id"]
        r = client.post(f"/api/series/{stopped}/stop", json={}, headers=headers)
        assert r.status_code == 200 and r.json()["status"] in ("done", "cancelled"), r.text
        [stop] = r.json()["approvals"]
        assert (stop["action"], stop["channel"], stop["new_cap_usd"]) == ("stop", "studio", None)
        assert r.json()["verdict"]["reason"] == "stopped_at_cap"

        # The agent's token with an MCP session's headers, or a forged terminal channel, never approves or stops.
        mcp = start(client, experiment_id="rate", simulate=True, cap_usd="2.00")["series"]["series_id"]
        for forged in ({"Mcp-Session-Id": "abc"}, {"X-Aqven-Channel": "terminal", "X-Aqven-Confirmed": "tty"}):
            for action in ("approve", "stop"):
                r = client.post(f"/api/series/{mcp}/{action}", json={}, headers=forged)
                assert r.status_code == 403 and r.json()["error"]["code"] == "PERSON_REQUIRED"
            r = client.post("/api/project/cap/confirm", json={"cap_usd": "1.00"}, headers=forged)
            assert r.status_code == 403 and r.json()["error"]["code"] == "PERSON_REQUIRED"
        assert get(client, mcp)["status"] == "awaiting_approval" and get(client, mcp)["approvals"] == []


def test_a_finding_names_the_approvals_behind_it(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(4, 3))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True, cap_usd="4.00")["series"]["series_id"]
        assert client.post(f"/api/series/{sid}/approve", json={}, headers=person_headers()).status_code == 200
        snap = settle(client, sid)
        assert snap["status"] == "done" and snap["finding"], snap["status"]
    import yaml

    finding = yaml.safe_load((root / snap["finding"]).read_text())
    [approval] = finding["approvals"]
    assert (approval["channel"], approval["old_cap_usd"], approval["new_cap_usd"]) == ("terminal", "4.00", "4.00")
    key = person_key()
    assert key is not None and approval["person"] == key.name  # who approved spending above the project cap
    md = (root / "FINDINGS.md").read_text()
    assert f"Spending above its cap approved by {key.name} terminal (cap $4.00)." in md


def test_no_mcp_tool_approves_stops_or_confirms() -> None:
    from aqven.server.mcp_server import tool_names

    names = tool_names()
    assert names and not [n for n in names if any(w in n for w in ("approve", "stop", "cap", "confirm"))]


@pytest.mark.parametrize(
    "bad",
    [
        "1_000",
        "٣",
        "１",
        "1e3",
        "1e999999999",
        "NaN",
        "Infinity",
        "-1",
        "0",
        "0.0000001",
        "1.1234567",
        "1000000.01",
        "2.00 USD",
        "",
        " ",
        " 1",
        "1 ",
        "\t1",
        "1\n",
        "\u00a01",
        True,
        [],
        {},
        float("inf"),
        1e999999,
        0,
        -2,
    ],
)
def test_caps_are_plain_decimals_within_the_ceiling(bad: Any) -> None:
    with pytest.raises(AqvenError) as err:
        parse_cap(bad)
    assert err.value.code == "VALIDATION_ERROR" and "$1,000,000" in err.value.hint


def test_good_caps_parse_exactly() -> None:
    assert parse_cap("2.5") == Decimal("2.5") and parse_cap(2.5) == Decimal("2.5") and parse_cap(3) == Decimal(3)
    assert parse_cap("1000000") == Decimal("1000000") and parse_cap("0.000001") == Decimal("0.000001")
    assert parse_cap("1.50000000") == Decimal("1.50000000") and parse_cap(None) is None


SPACED_CAPS = (" 1", "1 ", "\t1", "1\n")


def test_a_cap_with_whitespace_is_refused_wherever_a_cap_is_read(tiny_env: Path, tmp_path: Path) -> None:
    """`" 1"` was read as $1 where every other malformed cap is refused: REST bodies, `aqven approve --cap`,
    aqven.yaml and .aqven/local.yaml now read caps by one grammar (aqven.project.money)."""
    root = write_tiny(tmp_path / "tiny", case_names(3, 1))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True, cap_usd="2.00")["series"]["series_id"]
        for cap in SPACED_CAPS:
            for path, body in (
                (f"/api/series/{sid}/approve", {"cap_usd": cap}),
                ("/api/series", {"experiment_id": "rate", "simulate": True, "cap_usd": cap}),
                ("/api/experiments/rate/launch-plan", {"cap_usd": cap}),
                ("/api/project/cap/confirm", {"cap_usd": cap}),
            ):
                r = client.post(path, json=body)
                assert r.status_code == 422, (path, cap, r.text)
                error = r.json()["error"]
                assert error["code"] == "VALIDATION_ERROR" and "plain decimal" in error["hint"], (path, cap, error)
        assert get(client, sid)["status"] == "awaiting_approval"
        assert [s["series_id"] for s in client.get("/api/series").json()] == [sid]
    # The files: a cap with whitespace is a diagnostic, and the project keeps its cap.
    good = (root / "aqven.yaml").read_text()
    for cap in SPACED_CAPS:
        (root / "aqven.yaml").write_text(good.replace('spend_cap_usd: "1.00"', f"spend_cap_usd: {json.dumps(cap)}"))
        _ws, found = check_workspace(root)
        assert [(d.code, d.line) for d in found if d.file == "aqven.yaml"] == [("E_WRONG_TYPE", 4)], cap
    (root / "aqven.yaml").write_text(good)
    (root / ".aqven").mkdir(exist_ok=True)  # on PostgreSQL no database file made it
    for cap in SPACED_CAPS:
        (root / ".aqven" / "local.yaml").write_text(f"research:\n  spend_cap_usd: {json.dumps(cap)}\n")
        _ws, found = check_workspace(root)
        assert [(d.code, d.line) for d in found if d.file == ".aqven/local.yaml"] == [("E_WRONG_TYPE", 2)], cap
    (root / ".aqven" / "local.yaml").unlink()


def test_aqven_approve_refuses_a_cap_with_whitespace(tmp_path: Path) -> None:
    """The real command: `aqven approve SID --cap " 1"` is refused by the server with a hint."""
    from aqven.project.init import init_project

    root = init_project(tmp_path / "lumen", "lumen")
    env = cli_env(AQVEN_SIMULATE="1")
    try:
        body = ["reply_overpromise_risk", "--cases", "1", "--repeats", "1", "--cap", "3.00", "--json"]
        paused = aqven("series", *body, cwd=root, env=env)
        assert paused.returncode == 3, paused.stdout + paused.stderr
        sid = json.loads(paused.stdout.strip().splitlines()[-1])["series_id"]
        for cap in SPACED_CAPS:
            out = aqven("approve", sid, "--cap", cap, "--yes", cwd=root, env=env)
            text = out.stdout + out.stderr
            assert out.returncode != 0 and "VALIDATION_ERROR" in text and "plain decimal" in text, (cap, text)
        spaced = aqven("series", *body[:-3], "--cap", " 1", "--json", cwd=root, env=env)
        assert spaced.returncode != 0 and "VALIDATION_ERROR" in spaced.stdout + spaced.stderr
        from aqven.server.client import Client

        state = Client(root).get(f"/api/series/{sid}")
        assert state["status"] == "awaiting_approval" and state["approvals"] == []
    finally:
        stop_server(root)


def test_an_absurd_cap_on_approve_is_refused_and_the_series_still_waits(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 1))
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", simulate=True, cap_usd="2.00")["series"]["series_id"]
        for cap in ("1e999999999", 1e308, "1_000", "٣", "2000000"):
            r = client.post(f"/api/series/{sid}/approve", json={"cap_usd": cap}, headers=person_headers())
            assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_ERROR", (cap, r.text)
            assert "hint" in r.json()["error"]
        for body in ({"cap_usd": "1e400"}, {"on": "dev", "cap_usd": "0.0000001"}):
            r = client.post("/api/experiments/rate/launch-plan", json=body)
            assert r.status_code == 422, r.text
        r = client.post("/api/series", json={"experiment_id": "rate", "cap_usd": "1e999999999"})
        assert r.status_code == 422, r.text
        assert get(client, sid)["status"] == "awaiting_approval"
        assert (
            client.post(f"/api/series/{sid}/approve", json={"cap_usd": 2.5}, headers=person_headers()).status_code
            == 200
        )
        assert settle(client, sid)["status"] == "done"


def test_a_raised_project_cap_waits_for_a_person(tiny_env: Path, tmp_path: Path) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(3, 1))
    with client_for(root) as client:
        first = client.get("/api/project").json()
        assert (first["project_cap_usd"], first["project_cap_pending"]) == ("1.00", False)  # a new project: confirmed
        confirmed = load(root).cap  # kept in the person folder, outside the project
        assert (
            confirmed is not None
            and confirmed.channel == "initial"
            and not (root / ".aqven" / "project_cap.json").exists()
        )

        aqven_yaml_cap(root, "100000", client)  # what an agent with a file tool could write
        plan = client.post("/api/experiments/rate/launch-plan", json={}).json()
        assert plan["project_cap_usd"] == "1.00" and plan["project_cap_asked_usd"] == "100000"
        assert plan["project_cap_pending"] is True and "aqven cap confirm" in plan["project_cap_note"]
        assert plan["cap_usd"] == "1.00" and plan["needs_approval"] is False
        sid = start(client, experiment_id="rate", simulate=True)["series"]["series_id"]
        snap = settle(client, sid)
        assert snap["spend"]["cap_usd"] == "1.00" and snap["spend"]["project_cap_usd"] == "1.00"
        assert snap["project_cap"]["project_cap_pending"] is True
        above = start(client, experiment_id="rate", simulate=True, cap_usd="50")["series"]
        assert above["status"] == "awaiting_approval"  # $50 is above the confirmed cap, whatever the file says

        r = client.post("/api/project/cap/confirm", json={"cap_usd": "100000"})  # the agent's token
        assert r.status_code == 403 and r.json()["error"]["code"] == "PERSON_REQUIRED"
        person = person_headers()
        r = client.post("/api/project/cap/confirm", json={"cap_usd": "99999"}, headers=person)  # not what it asks
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_ERROR"
        r = client.post("/api/project/cap/confirm", json={"cap_usd": "100000"}, headers=person)
        assert r.status_code == 200, r.text
        assert (r.json()["project_cap_usd"], r.json()["project_cap_confirmed_by"]) == ("100000", "terminal")
        plan = client.post("/api/experiments/rate/launch-plan", json={}).json()
        assert plan["project_cap_usd"] == "100000" and plan["project_cap_pending"] is False

        aqven_yaml_cap(root, "0.50", client)  # lowering takes effect at once
        plan = client.post("/api/experiments/rate/launch-plan", json={}).json()
        assert (plan["project_cap_usd"], plan["project_cap_pending"]) == ("0.50", False)
        aqven_yaml_cap(root, "2.00", client)  # and a raise is measured from the lowered cap
        plan = client.post("/api/experiments/rate/launch-plan", json={}).json()
        assert (plan["project_cap_usd"], plan["project_cap_asked_usd"]) == ("0.50", "2.00")

        aqven_yaml_cap(root, "2000000")  # above the ceiling: aqven check refuses the file, nothing confirms it
        wait_until(
            lambda: (
                client.post("/api/project/cap/confirm", json={"cap_usd": "2000000"}, headers=person).status_code == 422
            )
        )


def _pty_run(args: list[str], cwd: Path, answer: str, env: dict[str, str]) -> tuple[int, str]:
    """Run the aqven command on a pseudo-terminal, answer its question with `answer`, return (exit code, output)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "aqven", *args], cwd=cwd, env=env, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    out = b""
    answered = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _w, _x = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not answered and b"[y/N]" in out:
                os.write(leader, answer.encode() + b"\n")
                answered = True
        elif proc.poll() is not None:
            break
    code = proc.wait(timeout=30)
    os.close(leader)
    return code, out.decode(errors="replace")


def test_aqven_approve_stop_and_cap_confirm_ask_a_person(tmp_path: Path) -> None:
    from aqven.project.init import init_project

    root = init_project(tmp_path / "lumen", "lumen")
    env = cli_env(AQVEN_SIMULATE="1")
    body = ["reply_overpromise_risk", "--cases", "1", "--repeats", "1", "--cap", "3.00"]
    try:
        paused = aqven("series", *body, "--json", cwd=root, env=env)
        assert paused.returncode == 3, paused.stdout + paused.stderr
        sid = json.loads(paused.stdout.strip().splitlines()[-1])["series_id"]

        # No terminal to ask at: refused without --yes, and nothing changes.
        out = aqven("approve", sid, cwd=root, env=env)
        assert out.returncode == 2 and "CONFIRMATION_REQUIRED" in out.stdout + out.stderr
        out = aqven("stop", sid, cwd=root, env=env)
        assert out.returncode == 2 and "CONFIRMATION_REQUIRED" in out.stdout + out.stderr
        # A person says no at the terminal: nothing changes either.
        code, text = _pty_run(["approve", sid], root, "n", env)
        assert code == 1 and "under a cap of $3.00 (was $3.00)" in text and "nothing changed" in text, text
        # A person says yes.
        code, text = _pty_run(["approve", sid], root, "y", env)
        assert code == 0, text
        from aqven.server.client import Client

        client = Client(root)
        [approval] = client.get(f"/api/series/{sid}")["approvals"]
        assert (approval["channel"], approval["confirmed"]) == ("terminal", "tty")

        second = aqven("series", *body, "--json", cwd=root, env=env)
        sid2 = json.loads(second.stdout.strip().splitlines()[-1])["series_id"]
        out = aqven("stop", sid2, "--yes", cwd=root, env=env)
        assert out.returncode in (0, 1), out.stdout + out.stderr
        [stop] = client.get(f"/api/series/{sid2}")["approvals"]
        assert (stop["action"], stop["channel"], stop["confirmed"]) == ("stop", "terminal", "--yes")

        # aqven.yaml raises the cap: the CLI says nothing is confirmed until a person does.
        text = (root / "aqven.yaml").read_text()
        (root / "aqven.yaml").write_text(text.replace('spend_cap_usd: "1.00"', 'spend_cap_usd: "7.50"'))
        assert 'spend_cap_usd: "7.50"' in (root / "aqven.yaml").read_text()
        wait_until(lambda: client.get("/api/project")["project_cap_pending"] is True)  # once the server reloaded
        out = aqven("cap", "confirm", cwd=root, env=env)
        assert out.returncode == 2 and client.get("/api/project")["project_cap_usd"] == "1.00"
        code, text = _pty_run(["cap", "confirm"], root, "y", env)
        assert code == 0 and "asks for a project cap of $7.50" in text, text
        project = client.get("/api/project")
        assert (project["project_cap_usd"], project["project_cap_confirmed_by"]) == ("7.50", "terminal")
        out = aqven("cap", "confirm", cwd=root, env=env)
        assert out.returncode == 0 and "nothing to confirm" in out.stdout
    finally:
        stop_server(root)
