"""Where things are: the repository, the tests folder and its data."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
BROKEN_PROJECTS = TESTS / "broken_projects"
ARTIFACTS = REPO / "test-artifacts"
