"""Held-out series show nothing per attempt: the attacks of an agent with the server token, on a real server.

A real `aqven serve` process on the tiny project (tests/support/series_kit.py), its attempts held until the test
releases them one at a time (TINY_HOLD), concurrency 1, a poll of every surface after each attempt:

- counts by outcome and status (Studio's attempts and runs listings, `GET /api/runs`' header, Studio's overview),
  spend (`series_get`, Studio's series page and spend curve, the cost to finish) move only when the series'
  coarse step moves (every 20 attempts here), never with one attempt; once it ended, the exact figures show;
- a look runs its named cases on whichever side they are (the spec), and one on a failing, dear held-out case reads
  exactly as one on a passing, cheap case on every surface, the project-wide counts do not move, and such looks are
  listed as held-out reads (the launch plan, the finding, FINDINGS.md);
- the control: a dev series shows its spend and counts per attempt, exactly, and a look on working cases runs.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any

from aqven.project.split import side_of
from support.commands import aqven, cli_env
from support.live_server import LiveServer
from support.series_kit import PACKAGE, attempts, case_names, first_on, run_order, wait_until, write_tiny

STEP = 20  # the coarse step of a series of fewer than 200 attempts
OUTCOMES = ("pass", "fail", "model_failure", "infra")


def held_out_cases() -> tuple[list[str], list[str]]:
    """42 held-out cases: 36 that pass at $0.01, 4 that fail at $0.05 (what an output retry looks like through
    the money), 2 whose simulator breaks (an infrastructure error: the run fails); and 4 working cases."""
    good = case_names(4, 36)
    dear = [first_on("holdout", "fail_pricey", i * 1000) for i in range(4)]
    broken = [first_on("holdout", "simcrash", i * 1000) for i in range(2)]
    return [*good, *dear, *broken], [n for n in good if side_of(PACKAGE, n) == "dev"]


def observe(server: LiveServer, sid: str) -> dict[str, Any]:
    """Everything a poll can read of the series that could tell how one attempt ended."""
    snap = server.get(f"/api/series/{sid}")
    studio = server.get(f"/api/studio/series/{sid}")
    finish = server.get(f"/api/studio/series/{sid}/finish")
    seen: dict[str, Any] = {
        "spend": snap["spend"]["usd"],
        "unpriced": snap["spend"]["unpriced_attempts"],
        "reruns": snap["progress"]["reruns"],
        "studio_spend": studio["spend"]["usd"],
        "spend_curve": studio["spend_curve"],
        "per_attempt": finish["per_attempt_usd"],
        "to_finish": finish["total_usd"],
        "overview_runs": server.get("/api/studio/overview")["runs"]["by_status"],
    }
    for outcome in OUTCOMES:
        seen[f"attempts?outcome={outcome}"] = server.get(f"/api/studio/series/{sid}/attempts?outcome={outcome}")[
            "held_out"
        ]
        seen[f"studio runs?series_id&outcome={outcome}"] = server.get(
            f"/api/studio/runs?series_id={sid}&outcome={outcome}"
        )["held_out_hidden"]
        seen[f"studio runs?outcome={outcome}"] = server.get(f"/api/studio/runs?outcome={outcome}")["held_out_hidden"]
    for status in ("done", "failed"):
        seen[f"attempts?status={status}"] = server.get(f"/api/studio/series/{sid}/attempts?status={status}")["held_out"]
        seen[f"studio runs?status={status}"] = server.get(f"/api/studio/runs?status={status}")["held_out_hidden"]
        _code, headers, _body = server.call("GET", f"/api/runs?series_id={sid}&status={status}")
        seen[f"runs?series_id&status={status}"] = headers["x-hidden-holdout-runs"]
    return {"done": snap["progress"]["done"], "as_of": (snap.get("coarse") or {}).get("as_of_done"), **seen}


def poll(server: LiveServer, sid: str) -> dict[str, Any]:
    """One consistent poll: read again when a coarse step was reached while it read."""
    while True:
        seen = observe(server, sid)
        if (server.get(f"/api/series/{sid}").get("coarse") or {}).get("as_of_done") == seen["as_of"]:
            return seen


def exact_spend(root: Path, sid: str) -> Decimal:
    return sum((Decimal(a["cost_usd"] or "0") for a in attempts(root, sid)), Decimal(0))


def test_held_out_counts_and_spend_move_only_at_coarse_steps(tiny_env: Path, hold: Path, tmp_path: Path) -> None:
    names, dev = held_out_cases()
    root = write_tiny(tmp_path / "tiny", names, concurrency=1)
    with LiveServer(root, cli_env()) as server:
        body = {"experiment_id": "rate", "on": "holdout", "simulate": True}
        code, _h, started = server.call("POST", "/api/series", body)
        assert code == 201, started
        sid = started["series"]["series_id"]
        order = run_order(root, sid)
        assert len(order) == 42
        seen = [poll(server, sid)]
        for i, case in enumerate(order, start=1):
            (hold / case).touch()
            wait_until(lambda i=i: server.get(f"/api/series/{sid}")["progress"]["done"] >= i)  # type: ignore[misc]
            if i < len(order):
                seen.append(poll(server, sid))
        final = wait_until(lambda: (s := server.get(f"/api/series/{sid}?wait_seconds=5"))["ended_at"] and s)

        # While it ran, nothing moved between two coarse steps; at a step, 20 attempts' worth moved at once.
        for a, b in itertools.pairwise(seen):
            if a["as_of"] == b["as_of"]:
                moved = {k: (a[k], b[k]) for k in a if k not in ("done", "as_of") and a[k] != b[k]}
                assert not moved, (a["done"], b["done"], moved)
        assert sorted({s["as_of"] for s in seen}) == [0, STEP, 2 * STEP]
        assert seen[0]["spend"] == "0" and seen[0]["attempts?outcome=fail"] == 0  # nothing before the first step
        at_step = next(s for s in seen if s["as_of"] == STEP)
        assert Decimal(at_step["spend"]) > 0 and len(at_step["spend_curve"]) == 1

        # Once it ended, the exact figures show (as the verdict does); the cap held on them all along.
        spent = exact_spend(root, sid)
        assert spent == Decimal("36") * Decimal("0.01") + 4 * Decimal("0.05")
        assert Decimal(final["spend"]["usd"]) == spent
        assert server.get(f"/api/studio/series/{sid}/attempts?outcome=fail")["held_out"] == 4
        assert server.get(f"/api/studio/runs?series_id={sid}&outcome=fail")["held_out_hidden"] == 4
        studio = server.get(f"/api/studio/series/{sid}")
        assert Decimal(studio["spend_curve"][-1]["usd"]) == spent and len(studio["spend_curve"]) == 42

        # The control: a dev series shows its spend and counts per attempt, exactly, as before.
        (hold / "open").unlink(missing_ok=True)
        code, _h, started = server.call("POST", "/api/series", {"experiment_id": "rate", "on": "dev", "simulate": True})
        assert code == 201, started
        dev_sid = started["series"]["series_id"]
        shown = []
        for i, case in enumerate(run_order(root, dev_sid), start=1):
            (hold / case).touch()
            wait_until(lambda i=i: server.get(f"/api/series/{dev_sid}")["progress"]["done"] >= i)  # type: ignore[misc]
            snap = server.get(f"/api/series/{dev_sid}")
            assert Decimal(snap["spend"]["usd"]) == exact_spend(root, dev_sid)
            listed = server.get(f"/api/studio/series/{dev_sid}/attempts?status=done")
            assert listed["total"] == i and listed["held_out"] == 0
            shown.append(snap["spend"]["usd"])
        assert len(set(shown)) == len(dev) == 4  # moved with every attempt


def observe_look(server: LiveServer, sid: str) -> dict[str, Any]:
    """Everything a poll can read of a look that could tell how its held-out attempts ended (ids and times left
    out, so two looks compare)."""
    snap = server.get(f"/api/series/{sid}?include_cases=true")
    studio = server.get(f"/api/studio/series/{sid}")
    finish = server.get(f"/api/studio/series/{sid}/finish")
    dist = server.get(f"/api/studio/series/{sid}/distributions")
    seen: dict[str, Any] = {
        "progress": snap["progress"],
        "matrix": snap["matrix"],
        "cases": [c["case"] for c in snap.get("cases") or []],
        "hidden_cases": snap.get("hidden_cases"),
        "spend": snap["spend"],
        "studio_spend": studio["spend"],
        "spend_curve": [p["usd"] for p in studio["spend_curve"] or []],
        "finish": {k: finish[k] for k in ("per_attempt_usd", "more_usd", "total_usd", "cap_to_finish_usd")},
        "distributions": [{k: v for k, v in d.items() if k not in ("latency_ms",)} for d in dist["variants"]],
        "status": snap["status"],
    }
    for outcome in OUTCOMES:
        seen[f"attempts?outcome={outcome}"] = server.get(f"/api/studio/series/{sid}/attempts?outcome={outcome}")[
            "held_out"
        ]
        seen[f"studio runs?series_id&outcome={outcome}"] = server.get(
            f"/api/studio/runs?series_id={sid}&outcome={outcome}"
        )["held_out_hidden"]
    for status in ("done", "failed"):
        seen[f"attempts?status={status}"] = server.get(f"/api/studio/series/{sid}/attempts?status={status}")["held_out"]
        _code, headers, _body = server.call("GET", f"/api/runs?series_id={sid}&status={status}")
        seen[f"runs?series_id&status={status}"] = headers["x-hidden-holdout-runs"]
    return seen


def observe_all(server: LiveServer) -> dict[str, Any]:
    """The project-wide counts: Studio's overview and runs listings, GET /api/runs' hidden count."""
    seen: dict[str, Any] = {"overview": server.get("/api/studio/overview")["runs"]["by_status"]}
    for outcome in OUTCOMES:
        seen[f"studio runs?outcome={outcome}"] = server.get(f"/api/studio/runs?outcome={outcome}")["held_out_hidden"]
    for status in ("done", "failed"):
        seen[f"studio runs?status={status}"] = server.get(f"/api/studio/runs?status={status}")["held_out_hidden"]
        _code, headers, _body = server.call("GET", f"/api/runs?status={status}")
        seen[f"runs?status={status}"] = headers["x-hidden-holdout-runs"]
    return seen


def test_a_look_on_held_out_cases_shows_nothing_of_them_and_is_a_held_out_read(
    tiny_env: Path, hold: Path, tmp_path: Path
) -> None:
    """A look runs its named cases on whichever side they are (the spec), so a look on one held-out case is the
    differencing attack: its counts by outcome, spend (an output retry doubles a call's cost; here the failing case
    costs 5x), cost distributions and the cost to finish would each tell that case's result. A look on a failing,
    dear held-out case and one on a passing, cheap one must read the same on every surface, before and after they
    end, and the project-wide counts must not move; the looks are listed as held-out reads."""
    bad, good = first_on("holdout", "fail_pricey"), first_on("holdout", "fine")
    dev = case_names(1, 0, prefix="d")
    root = write_tiny(tmp_path / "tiny", [*dev, bad, good, *case_names(2, 4, prefix="x")])
    (hold / "open").touch()
    with LiveServer(root, cli_env()) as server:

        def look(names: list[str]) -> str:
            body = {"look": {"flow_id": "answer", "dataset_id": "cases", "case_names": names}, "simulate": True}
            code, _h, out = server.call("POST", "/api/series", body)
            assert code == 201, out  # the spec: a look runs its cases on whichever side they are
            sid = str(out["series"]["series_id"])
            wait_until(lambda: server.get(f"/api/series/{sid}?wait_seconds=5")["ended_at"])
            return sid

        before = observe_all(server)
        a, b = look([bad]), look([good])
        assert observe_all(server) == before  # nothing project-wide moved with two held-out attempts
        seen_a, seen_b = observe_look(server, a), observe_look(server, b)
        assert seen_a == seen_b, {k: (seen_a[k], seen_b[k]) for k in seen_a if seen_a[k] != seen_b[k]}
        assert seen_a["progress"]["held_out_attempts"] == 1 and seen_a["hidden_cases"] == 1
        assert seen_a["spend"]["usd"] == "0" and seen_a["cases"] == []
        assert exact_spend(root, a) == 5 * exact_spend(root, b) > 0  # the money differs: only what is shown hides it
        # beside a working case: the working case shows exactly, the held-out one not at all
        c, d = look([dev[0], bad]), look([dev[0], good])
        seen_c, seen_d = observe_look(server, c), observe_look(server, d)
        assert seen_c == seen_d, {k: (seen_c[k], seen_d[k]) for k in seen_c if seen_c[k] != seen_d[k]}
        assert seen_c["cases"] == [dev[0]] and Decimal(seen_c["spend"]["usd"]) == Decimal("0.01")
        assert observe_all(server) != before  # the working cases' runs are counted, as any run of a working case

        # A held-out read: the launch plan of an experiment on those cases says so, and its finding lists them.
        _code, _h, plan = server.call("POST", "/api/experiments/rate/launch-plan", {"on": "holdout"})
        assert plan["earlier_reads"]["read_cases"] == 2
        assert "4 looks on held-out cases read 2 of these held-out cases" in plan["earlier_reads"]["text"]
        code, _h, out = server.call("POST", "/api/series", {"experiment_id": "rate", "on": "holdout", "simulate": True})
        assert code == 201, out
        sid = out["series"]["series_id"]
        done = wait_until(lambda: (s := server.get(f"/api/series/{sid}?wait_seconds=5"))["ended_at"] and s)
        assert done["finding"], done["status"]
        md = (root / "FINDINGS.md").read_text()
        assert all(f"look `{x}`" in md for x in (a, b, c, d)), md

        # `aqven look` on a held-out case runs and prints nothing of it.
        cli = aqven("look", "answer", "--dataset", "cases", "--case", bad, "--simulate", cwd=root)
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "fail" not in cli.stdout.lower().replace(bad.lower(), ""), cli.stdout
