"""`providers: {<provider>: {rpm: N}}` holds a live series to N requests in any window, however many attempts
run side by side; without it the same series sends them together. Live calls over real HTTP to the fake server
on 127.0.0.1; the window is shortened from 60 s to 1 s so that the test is quick."""

from __future__ import annotations

from pathlib import Path

import pytest

from aqven.models import rate_limit
from support.fake_provider import FakeProvider, FakeReply
from support.series_kit import case_names, client_for, live_agent, settle, start, tiny_environment, write_tiny

WINDOW_S = 1.0
AQVEN_YAML = """\
package: tiny
research:
  spend_cap_usd: "5.00"
concurrency: 6
engine:
  provider_retries: 0
{limits}"""


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(rate_limit, "WINDOW_S", WINDOW_S)
    rate_limit.reset()
    return tiny_environment(monkeypatch, tmp_path)


def most_in_a_window(times: list[float]) -> int:
    """The most requests that arrived within WINDOW_S of each other (less a little for the clock)."""
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t - start < WINDOW_S - 0.05) for i, start in enumerate(times))


def run_series(tmp_path: Path, name: str, limits: str) -> tuple[dict[str, object], list[float]]:
    with FakeProvider() as fake:
        fake.default = FakeReply(output={"reply": "good"})
        overrides: dict[str, str | None] = {
            "aqven.yaml": AQVEN_YAML.format(limits=limits),
            "agents/w.yaml": live_agent(fake.base_url),
        }
        root = write_tiny(tmp_path / name, case_names(6, 2), overrides=overrides)
        with client_for(root) as client:
            sid = start(client, experiment_id="rate", on="dev")["series"]["series_id"]
            snap = settle(client, sid, timeout=60)
        return snap, [r.at for r in fake.chat_requests()]


@pytest.mark.usefixtures("tiny_env")
def test_rpm_holds_a_live_series_to_its_requests_per_window(tmp_path: Path) -> None:
    free, free_times = run_series(tmp_path, "free", "")
    assert free["status"] == "done" and len(free_times) == 6
    assert most_in_a_window(free_times) > 2  # six attempts side by side: several calls at once

    limited, times = run_series(tmp_path, "limited", "providers:\n  openai-compatible: {rpm: 2}\n")
    assert limited["status"] == "done", limited.get("error")
    progress = limited["progress"]
    assert isinstance(progress, dict) and progress["counted"] == 6 and progress["infra_errors"] == 0
    assert len(times) == 6 and most_in_a_window(times) <= 2
    assert max(times) - min(times) >= 2 * WINDOW_S - 0.1  # six calls at two a window: three windows
