"""The project server listens on loopback only, and a provider key never leaves the environment.

One real `python -m aqven serve` process, with a unique key planted in OPENROUTER_API_KEY and the openrouter
provider pointed at the fake provider, which answers 401 echoing the Authorization header (so the key comes
back inside an error message). A series, runs over REST and over the `aqven` command, then every REST
response, every CLI output and every byte under `.aqven/` (the database with its WAL, the server log,
server.json) is searched for the key.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import uuid
from pathlib import Path
from typing import Any

from support.commands import aqven
from support.fake_provider import FakeProvider, FakeReply
from support.fault_soak import EXPERIMENT, http, live_server, server_env, wait_series, write_project
from support.store_access import places_holding


def listening_addresses(port: int) -> list[str]:
    """Local addresses of the TCP sockets listening on `port`, from /proc/net/tcp and tcp6."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state = fields[1], fields[3]
                addr, hexport = local.rsplit(":", 1)
                if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                    found.append(addr)
    return found


def other_local_ips() -> list[str]:
    """This machine's IPv4 addresses other than loopback (from /proc/net/fib_trie)."""
    ips: set[str] = set()
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for prev, line in itertools.pairwise(lines):
            if "/32 host LOCAL" in line:
                ip = prev.strip().split()[-1]
                if not ip.startswith("127."):
                    ips.add(ip)
    return sorted(ips)


def test_loopback_only_and_no_key_anywhere(tmp_path: Path) -> None:
    key = f"PLANTED{uuid.uuid4().hex}KEY"  # not shaped like sk-…: only the environment-based redaction can hide it
    root = tmp_path / "p"
    write_project(root, cases=4, simulator="seeded")
    seen: list[str] = []  # every response and output, searched at the end

    with FakeProvider() as fp:
        fp.default = FakeReply("401_echo")
        env = server_env(
            AQVEN_OPENROUTER_BASE_URL=fp.base_url,
            OPENROUTER_API_KEY=key,
            AQVEN_PRICES_FILE=str(tmp_path / "no-prices.json"),
        )
        with live_server(root, env) as server:
            port = server.port

            # ---- loopback only ----
            info = json.loads((root / ".aqven" / "server.json").read_text())
            assert info["host"] == "127.0.0.1" and info["port"] == port
            assert listening_addresses(port) == ["0100007F"]  # 127.0.0.1, and nothing on 0.0.0.0 or ::
            for ip in other_local_ips():
                with socket.socket() as s:
                    s.settimeout(2)
                    assert s.connect_ex((ip, port)) != 0, f"the server answers on {ip}"

            def get(path: str) -> Any:
                out = http(port, "GET", path)
                seen.append(json.dumps(out))
                return out

            # ---- a series and runs that all end on the echoed 401 ----
            started = http(port, "POST", "/api/series", {"experiment_id": EXPERIMENT})
            seen.append(json.dumps(started))
            sid = started["series"]["series_id"]
            state = wait_series(server, sid, limit_s=60)
            assert state["status"] == "failed" and state["error"]["code"] == "PROVIDER_ERROR"
            run = http(port, "POST", "/api/runs", {"flow_id": "answer", "input": {"question": "x"}, "wait": True})
            seen.append(json.dumps(run))
            assert run["status"] == "failed" and run["error"]["code"] == "PROVIDER_ERROR"
            assert "***" in run["error"]["message"]  # the echoed key was masked, not dropped silently
            get(f"/api/series/{sid}?include_cases=true")
            for r in [*get(f"/api/runs?series_id={sid}&limit=100"), run]:
                get(f"/api/runs/{r['id']}")
                get(f"/api/runs/{r['id']}/events")
                get(f"/api/runs/{r['id']}/nodes/reply")
            for path in ("/api/project", "/api/agents", "/api/check", "/api/experiments", "/api/series", "/api/runs"):
                get(path)

            cli_env = {**env, "NO_COLOR": "1", "COLUMNS": "200"}
            for args in (
                ("run", "answer", "--input", '{"question": "y"}'),
                ("series", EXPERIMENT, "--json"),
            ):
                out = aqven(*args, cwd=root, env=cli_env, timeout=120)
                seen.append(out.stdout + out.stderr)
                assert "Traceback" not in out.stderr

        # the key really went to the provider, and came back in its 401 answers
        assert fp.chat_requests()
        assert all(r.headers.get("authorization") == f"Bearer {key}" for r in fp.chat_requests())

    assert not [s for s in seen if key in s], "the key is in a REST response or a CLI output"
    files = [p for p in (root / ".aqven").rglob("*") if p.is_file()]
    assert any(p.name == "server.log" for p in files)
    leaked = [str(p) for p in files if key.encode() in p.read_bytes()] + places_holding(root, key)
    assert leaked == [], f"the key is in {leaked}"
    everything = [p for p in root.rglob("*") if p.is_file()]
    assert not [str(p) for p in everything if key.encode() in p.read_bytes()]
