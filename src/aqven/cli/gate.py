"""`aqven series` as a CI gate: `--fail-on` verdicts, a JUnit report and a Markdown step summary.

The spec's exit codes (0 done, 1 cancelled or failed, 3 approval, 4 a person) say how a series *ended*; a CI
job also needs to fail on *what it found*. `--fail-on refuted,inconclusive,invalid` turns a done series whose
verdict is listed into exit code 5 (`EXIT_GATE`), distinct from the spec's codes. A dev series always ends
`signal`; the gate reads the verdict the table gave (`would_be`) for it, so a dev series in a pull request can
fail on `refuted` too. Held-out cases are never written one by one: the JUnit report and the summary list dev
cases only, as the snapshot does.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from aqven.errors import AqvenError
from aqven.project.diagnostics import Diagnostic

EXIT_GATE = 5
VERDICTS = ("confirmed", "refuted", "inconclusive", "signal", "invalid")
MAX_SUMMARY_CASES = 20


def parse_fail_on(text: str | None) -> frozenset[str]:
    """The verdicts of `--fail-on a,b,c`; an unknown one is a VALIDATION_ERROR naming the valid ones."""
    if not text:
        return frozenset()
    names = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(names - set(VERDICTS))
    if unknown:
        raise AqvenError(
            f"--fail-on names an unknown verdict: {', '.join(unknown)}",
            code="VALIDATION_ERROR",
            hint=f"list verdicts separated by commas, from: {', '.join(VERDICTS)}",
        )
    return frozenset(names)


def gate_hit(state: dict[str, Any], fail_on: frozenset[str]) -> str | None:
    """The verdict of a done series that `fail_on` lists, or None (the gate passes, or the series is not done).

    A signal matches `signal` itself, or the verdict it would be (`would_be`) on held-out cases."""
    if not fail_on or state.get("status") != "done":
        return None
    verdict = state.get("verdict") or {}
    name = verdict.get("verdict")
    if name in fail_on:
        return str(name)
    would_be = verdict.get("would_be")
    if name == "signal" and would_be in fail_on:
        return str(would_be)
    return None


def exit_code(state: dict[str, Any], fail_on: frozenset[str], code: int) -> int:
    """`code`, the spec's exit code for how the series ended; 5 instead of 0 when the series is done and its
    verdict is one `fail_on` lists."""
    return EXIT_GATE if code == 0 and gate_hit(state, fail_on) else code


def _rate(row: dict[str, Any]) -> str:
    if row.get("estimate") is None:
        return "—"
    text = f"{row['estimate']:.3f}"
    if row.get("low") is not None and row.get("high") is not None:
        text += f" [{row['low']:.3f}, {row['high']:.3f}]"
    return text


def _failing_cases(state: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Dev cases that failed (the snapshot lists no held-out case), with their failed checks and error codes."""
    out = []
    for row in state.get("cases") or []:
        if not row.get("failing") or row.get("side") != "dev":
            continue
        why: set[str] = set()
        for v in row["variants"].values():
            why.update(v.get("failed_checks") or [])
            why.update(a["error"] for a in v.get("attempts", []) if a.get("error"))
        out.append((str(row["case"]), sorted(why)))
    return out


def junit_xml(state: dict[str, Any], fail_on: frozenset[str]) -> str:
    """A JUnit report: one test for the verdict (failed when the gate fails), one per variant, one per dev case.

    Infrastructure errors are `<error>`s, counted failures `<failure>`s, as CI tools read them."""
    sid = state["series_id"]
    name = state.get("experiment_id") or "look"
    suite = ET.Element("testsuite", name=f"aqven.{name}", timestamp=str(state.get("created_at") or ""))
    props = ET.SubElement(suite, "properties")
    spend = state.get("spend") or {}
    for key, value in (
        ("series_id", sid),
        ("on", state.get("on")),
        ("status", state.get("status")),
        ("simulated", str(bool(state.get("simulated"))).lower()),
        ("spend_usd", spend.get("usd")),
        ("cap_usd", spend.get("cap_usd")),
        ("spend_lower_bound", str(bool(spend.get("lower_bound"))).lower()),
    ):
        ET.SubElement(props, "property", name=key, value=str(value))
    verdict = state.get("verdict") or {}
    tests = failures = errors = 0

    def case(test: str, *, failure: str | None = None, error: str | None = None, out: str = "") -> None:
        nonlocal tests, failures, errors
        tests += 1
        el = ET.SubElement(suite, "testcase", classname=f"aqven.{name}", name=test)
        if failure is not None:
            failures += 1
            ET.SubElement(el, "failure", message=failure, type="verdict").text = failure
        if error is not None:
            errors += 1
            ET.SubElement(el, "error", message=error, type="infrastructure").text = error
        if out:
            ET.SubElement(el, "system-out").text = out

    text = str(verdict.get("text") or f"series {state.get('status')}")
    hit = gate_hit(state, fail_on)
    if state.get("status") in ("cancelled", "failed"):
        err = state.get("error") or {}
        case("verdict", error=f"series {state['status']}: {err.get('code', '')} {err.get('message', '')}".strip())
    elif hit:
        case("verdict", failure=f"{hit} is in --fail-on: {text}", out=text)
    else:
        case("verdict", out=text)
    for row in state.get("matrix") or []:
        detail = (
            f"counted {row.get('counted', 0)} · passes {_num(row.get('passes'))} · rate {_rate(row)} · "
            f"model failures {row.get('model_failures', 0)} · infrastructure errors {row.get('infra_errors', 0)}"
        )
        case(f"variant {row['variant']}", out=detail)
    for case_name, why in _failing_cases(state):
        case(f"dev case {case_name}", failure=", ".join(why) or "failed", out=f"failed: {', '.join(why)}")
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _num(value: Any) -> str:
    """A count of passes: an integer when it is one (scores make fractions)."""
    f = float(value or 0)
    return str(int(f)) if f.is_integer() else f"{f:g}"


def _money(value: Any) -> str:
    d = Decimal(str(value or "0"))
    return f"${d:.6f}" if d < 1 else f"${d:.2f}"


def markdown_summary(state: dict[str, Any], fail_on: frozenset[str], code: int) -> str:
    """A Markdown summary of a finished series for a CI step summary: verdict, gate, variants, spend, dev cases."""
    name = state.get("experiment_id") or "look"
    verdict = state.get("verdict") or {}
    label = verdict.get("verdict") or state.get("status")
    if verdict.get("would_be"):
        label = f"{label} (would be {verdict['would_be']})"
    sim = " · simulated" if state.get("simulated") else ""
    lines = [f"### AQVEN series `{name}` on {state.get('on')}: {label}{sim}", ""]
    if verdict.get("text"):
        lines += [f"> {verdict['text']}", ""]
    err = state.get("error")
    if err:
        lines += [f"**{state.get('status')}**: `{err.get('code')}` {err.get('message')}", ""]
    hit = gate_hit(state, fail_on)
    if fail_on:
        listed = ",".join(sorted(fail_on))
        gate = f"**failed** ({hit} is in `--fail-on {listed}`)" if hit else f"passed (`--fail-on {listed}`)"
        lines += [f"Gate: {gate} · exit code {code}", ""]
    lines += [
        "| variant | counted | passes | rate [95% interval] | model failures | infrastructure errors | spend |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for row in state.get("matrix") or []:
        lines.append(
            f"| {row['variant']} | {row.get('counted', 0)} | {_num(row.get('passes'))} | {_rate(row)} | "
            f"{row.get('model_failures', 0)} | {row.get('infra_errors', 0)} | {_money(row.get('spend_usd'))} |"
        )
    spend = state.get("spend") or {}
    lower = " (a lower bound: some attempts had no known price)" if spend.get("lower_bound") else ""
    progress = state.get("progress") or {}
    lines += [
        "",
        f"Spent {_money(spend.get('usd'))} of {_money(spend.get('cap_usd'))}{lower} · "
        f"{progress.get('done', 0)} of {progress.get('attempts', 0)} attempts · series `{state['series_id']}`",
    ]
    failing = _failing_cases(state)
    if failing:
        lines += ["", f"Failing working (dev) cases ({len(failing)}):", ""]
        for case_name, why in failing[:MAX_SUMMARY_CASES]:
            lines.append(f"- `{case_name}`: {', '.join(why) or 'failed'}")
        if len(failing) > MAX_SUMMARY_CASES:
            lines.append(f"- … and {len(failing) - MAX_SUMMARY_CASES} more")
    if state.get("hidden_cases") and state.get("on") == "holdout":
        lines += ["", f"{state['hidden_cases']} held-out case(s) are not listed one by one."]
    if state.get("finding"):
        lines += ["", f"Finding written: `{state['finding']}`"]
    return "\n".join(lines) + "\n"


def write_reports(
    state: dict[str, Any], fail_on: frozenset[str], code: int, *, junit: Path | None, summary: Path | None
) -> None:
    """Write the JUnit file and the summary file when asked; append the summary to $GITHUB_STEP_SUMMARY when set."""
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(junit_xml(state, fail_on), encoding="utf-8")
    text = markdown_summary(state, fail_on, code)
    if summary is not None:
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(text, encoding="utf-8")
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        # GitHub's step summary file is shared by every step of the job: append, never overwrite.
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")


def _escape(text: str, *, prop: bool = False) -> str:
    # GitHub's workflow-command escaping: % and newlines always, and , : in properties.
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github_annotation(d: Diagnostic, root: Path) -> str:
    """One `aqven check` diagnostic as a GitHub Actions annotation on its file and line.

    The file is given relative to $GITHUB_WORKSPACE (the repository) when the project lives inside it."""
    props = [f"title={_escape(d.code, prop=True)}"]
    if d.file:
        path = (root / d.file).resolve()
        base = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()
        shown = str(path.relative_to(base)) if path.is_relative_to(base) else d.file
        props.insert(0, f"file={_escape(shown, prop=True)}")
        if d.line is not None:
            props.insert(1, f"line={d.line}")
    message = d.message + (f"\nhint: {d.hint}" if d.hint else "")
    return f"::{d.severity} {','.join(props)}::{_escape(message)}"
