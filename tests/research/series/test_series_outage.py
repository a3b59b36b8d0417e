"""A provider that stops answering holds the series' attempts with a bounded, jittered backoff: a server that
comes back within `engine.outage_hold_s` costs the series time, not its attempts; one that stays away fails them
as infrastructure errors once the hold is over. Live calls over real HTTP to the fake server on 127.0.0.1."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from support.fake_provider import FakeProvider, FakeReply
from support.series_kit import (
    case_names,
    client_for,
    get,
    live_agent,
    rows,
    settle,
    start,
    tiny_environment,
    wait_until,
    write_tiny,
)

AQVEN_YAML = """\
package: tiny
research:
  spend_cap_usd: "5.00"
concurrency: 2
engine:
  provider_retries: 0
  retry_backoff_s: 0.2
  outage_hold_s: {hold}
"""


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return tiny_environment(monkeypatch, tmp_path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def project(tmp_path: Path, port: int, hold: float) -> Path:
    overrides: dict[str, str | None] = {
        "aqven.yaml": AQVEN_YAML.replace("{hold}", str(hold)),
        "agents/w.yaml": live_agent(f"http://127.0.0.1:{port}/v1"),
    }
    return write_tiny(tmp_path / "p", case_names(4, 2), overrides=overrides)


def test_a_short_outage_costs_time_not_attempts(tiny_env: Path, tmp_path: Path) -> None:
    port = free_port()
    root = project(tmp_path, port, hold=60)
    fake = FakeProvider(port=port)
    fake.default = FakeReply(output={"reply": "good"})
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="dev")["series"]["series_id"]
        # The provider is down: the first call fails to connect, and is held (not failed) meanwhile.
        wait_until(lambda: rows(root, "SELECT 1 FROM events WHERE kind='retry' AND data LIKE '%outage%'"), 30)
        time.sleep(1.0)
        assert get(client, sid)["progress"]["done"] == 0
        with fake:  # the server is back, on the same port
            snap = settle(client, sid, timeout=60)
    assert snap["status"] == "done", snap.get("error")
    assert snap["progress"]["infra_errors"] == 0 and snap["progress"]["counted"] == 4
    assert fake.chat_requests()


def test_a_provider_that_stays_away_fails_once_the_hold_is_over(tiny_env: Path, tmp_path: Path) -> None:
    root = project(tmp_path, free_port(), hold=1.5)
    with client_for(root) as client:
        t0 = time.monotonic()
        snap = settle(client, start(client, experiment_id="rate", on="dev")["series"]["series_id"], timeout=60)
        took = time.monotonic() - t0
    assert snap["status"] == "failed" and snap["error"]["code"] == "PROVIDER_ERROR"
    assert "cannot reach the provider at http://127.0.0.1:" in snap["error"]["message"]
    assert 1.0 <= took < 30
