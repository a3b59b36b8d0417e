"""Shared fixtures: a showcase project on disk, the series tests' tiny project, and clean-up of spawned
servers. Helpers live in tests/support/ (importable as `support`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.commands import stop_server


@pytest.fixture(scope="session", autouse=True)
def person_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The person folder of this test session (XDG_CONFIG_HOME, inherited by every server and command the tests
    start): person keys and project records never touch the user's own ~/.config."""
    folder = tmp_path_factory.mktemp("xdg-config")
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(folder)
    yield folder / "aqven"
    if before is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = before


@pytest.fixture
def showcase(tmp_path: Path) -> Iterator[Path]:
    """A fresh showcase project (package lumen); its server, if any was started, is stopped after."""
    from aqven.project.init import init_project

    root = init_project(tmp_path / "lumen", "lumen")
    yield root
    stop_server(root)


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The series tests' tiny project environment (see support.series_kit.tiny_environment)."""
    from support.series_kit import tiny_environment

    return tiny_environment(monkeypatch, tmp_path)


@pytest.fixture
def hold(tiny_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """TINY_HOLD's folder: no attempt of the tiny simulator finishes until the test touches `open` or its case."""
    folder = tmp_path / "hold"
    folder.mkdir()
    monkeypatch.setenv("TINY_HOLD", str(folder))
    return folder


@pytest.fixture
def file_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Series run their cases in file order instead of the order their secret seed draws (the server runs in
    this process): for the tests whose cases must finish in a known order."""
    monkeypatch.setattr("aqven.research.series.order.case_order", lambda cases, seed: list(cases))
