"""`aqven series` as a CI gate, through the real command and a real server process on simulated models.

The tiny project's rate experiment (threshold 0.5 + 0.05) on cases that all fail is refuted on held-out cases
and a signal that would be refuted on working ones: `--fail-on` turns both into exit 5, `--junit` and
`--summary` (and $GITHUB_STEP_SUMMARY) report them, and held-out case names appear in neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from support.commands import aqven, cli_env, stop_server
from support.series_kit import case_names, prices_json, write_tiny

EXIT_GATE = 5


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], list[str]]]:
    names = case_names(6, 24, prefix="fail")
    root = write_tiny(tmp_path / "tiny", names, cap="20.00")
    prices = tmp_path / "prices.json"
    prices.write_text(prices_json())
    env = cli_env(AQVEN_PRICES_FILE=str(prices), GITHUB_STEP_SUMMARY=str(tmp_path / "step_summary.md"))
    yield root, env, names
    stop_server(root)


def test_a_refuted_held_out_series_fails_the_gate_with_junit_and_summary(
    tiny: tuple[Path, dict[str, str], list[str]], tmp_path: Path
) -> None:
    root, env, names = tiny
    junit, summary = tmp_path / "out" / "aqven.xml", tmp_path / "out" / "summary.md"
    args = ["series", "rate", "--on", "holdout", "--simulate", "--fail-on", "refuted,inconclusive,invalid"]
    r = aqven(*args, "--junit", str(junit), "--summary", str(summary), cwd=root, env=env)
    assert r.returncode == EXIT_GATE, r.stdout + r.stderr
    assert "refuted" in r.stdout.lower() and "--fail-on" in r.stderr, r.stdout + r.stderr

    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("name") == "aqven.rate"
    assert suite.get("failures") == "1" and suite.get("errors") == "0"
    verdict = suite.find("testcase[@name='verdict']")
    assert verdict is not None
    failure = verdict.find("failure")
    assert failure is not None and failure.get("message", "").startswith("refuted is in --fail-on")
    assert [t.get("name") for t in suite.iter("testcase")] == ["verdict", "variant as_written"]
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["on"] == "holdout" and props["simulated"] == "true" and props["status"] == "done"

    text = summary.read_text()
    assert "### AQVEN series `rate` on holdout: refuted" in text
    assert "Gate: **failed** (refuted is in `--fail-on inconclusive,invalid,refuted`) · exit code 5" in text
    assert "| as_written | 24 | 0 |" in text
    step = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert text in step
    for name in names:  # no held-out case (and no working one: none ran) is named anywhere
        assert name not in text and name not in junit.read_text() and name not in r.stdout


def test_a_dev_signal_fails_on_the_verdict_it_would_be_and_lists_failing_dev_cases(
    tiny: tuple[Path, dict[str, str], list[str]], tmp_path: Path
) -> None:
    root, env, names = tiny
    junit = tmp_path / "dev.xml"
    r = aqven(
        "series", "rate", "--simulate", "--fail-on", "refuted", "--junit", str(junit), "--json", cwd=root, env=env
    )
    assert r.returncode == EXIT_GATE, r.stdout + r.stderr
    state = json.loads(r.stdout)
    assert state["verdict"]["verdict"] == "signal" and state["verdict"]["would_be"] == "refuted"
    suite = ET.parse(junit).getroot()
    dev_cases = sorted(t.get("name", "") for t in suite.iter("testcase") if t.get("name", "").startswith("dev "))
    assert len(dev_cases) == 6 and suite.get("failures") == "7"  # the verdict and the six failing dev cases
    assert all(t.find("failure") is not None for t in suite.iter("testcase") if t.get("name", "").startswith("dev "))
    dev_names = {c.removeprefix("dev case ") for c in dev_cases}
    assert dev_names <= set(names)

    # The same series with a gate that does not list its verdict passes: the spec's exit 0.
    r = aqven("series", "rate", "--simulate", "--fail-on", "confirmed", cwd=root, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_unknown_verdict_in_fail_on_is_a_clear_error(tiny: tuple[Path, dict[str, str], list[str]]) -> None:
    root, env, _ = tiny
    r = aqven("series", "rate", "--simulate", "--fail-on", "refuted,wrong", cwd=root, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "VALIDATION_ERROR" in out and "wrong" in out and "confirmed, refuted" in out
    assert "Traceback" not in out
