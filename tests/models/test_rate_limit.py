"""Per-provider rpm / tpm limits: a sliding window per provider in which calls wait rather than exceed it; the
limits are read from aqven.yaml, and an unknown provider there is a diagnostic."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from aqven.models import rate_limit
from aqven.project.loader import load_project
from support.projects import write_files


@pytest.fixture(autouse=True)
def short_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rate_limit, "WINDOW_S", 0.5)  # the real window is a minute
    rate_limit.reset()


async def test_rpm_makes_calls_wait_for_the_window() -> None:
    starts: list[float] = []
    t0 = time.monotonic()

    async def one() -> None:
        slot = await rate_limit.acquire("openrouter", rpm=2, tpm=None)
        starts.append(time.monotonic() - t0)
        await asyncio.sleep(0.05)  # the call
        rate_limit.record(slot, 0)

    await asyncio.gather(*(one() for _ in range(6)))
    starts.sort()
    # Two calls per half-second window: the 3rd and 5th wait for a window each.
    assert starts[1] < 0.25 and starts[2] >= 0.5 and starts[4] >= 1.0
    for i in range(len(starts) - 2):
        assert starts[i + 2] - starts[i] >= 0.5 - 0.02  # never three in one window


async def test_a_call_counts_until_a_window_after_it_ended() -> None:
    # A provider counts a request when it arrives, between its start and its end: a call that took 0.3 s
    # still holds its place until a window after its end, never only a window after its start.
    slot = await rate_limit.acquire("openai", rpm=1, tpm=None)
    await asyncio.sleep(0.3)
    rate_limit.record(slot, 0)
    ended = time.monotonic()
    await rate_limit.acquire("openai", rpm=1, tpm=None)
    assert time.monotonic() - ended >= 0.5 - 0.02


async def test_a_running_call_counts_however_long_it_runs() -> None:
    slot = await rate_limit.acquire("mistral", rpm=1, tpm=None)
    second = asyncio.create_task(rate_limit.acquire("mistral", rpm=1, tpm=None))
    await asyncio.sleep(0.8)  # longer than the window: the first call still runs
    assert not second.done()
    rate_limit.record(slot, 0)
    await asyncio.wait_for(second, 1.0)


async def test_tpm_counts_the_tokens_calls_used() -> None:
    slot = await rate_limit.acquire("groq", rpm=None, tpm=1000)
    rate_limit.record(slot, 1200)  # this call used more than the limit
    t0 = time.monotonic()
    await rate_limit.acquire("groq", rpm=None, tpm=1000)
    assert time.monotonic() - t0 >= 0.45
    # Another provider has its own window.
    t0 = time.monotonic()
    await rate_limit.acquire("mistral", rpm=1, tpm=10)
    assert time.monotonic() - t0 < 0.1


def test_limits_come_from_aqven_yaml_and_an_unknown_provider_is_a_diagnostic(tmp_path: Path) -> None:
    root = write_files(tmp_path / "p", {"aqven.yaml": "package: x\nproviders:\n  openrouter: {rpm: 60, tpm: 100000}\n"})
    limits = load_project(root).config.providers["openrouter"]
    assert (limits.rpm, limits.tpm) == (60, 100000)
    write_files(root, {"aqven.yaml": "package: x\nproviders:\n  openruter: {rpm: 60}\n"})
    diags = load_project(root).diagnostics
    assert any("unknown provider 'openruter'" in d.message and d.file == "aqven.yaml" for d in diags), diags
