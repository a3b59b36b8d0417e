"""Held-out series show nothing per attempt: the attacks of an agent with the server token, on a real server.

A real `aqven serve` process on the tiny project (tests/support/series_kit.py), its attempts held until the test
releases them one at a time (TINY_HOLD), concurrency 1, a poll of every surface after each attempt:

- counts by outcome and status (Studio's attempts and runs listings, `GET /api/runs`' header, Studio's overview),
  spend (`series_get`, Studio's series page and spend curve, the cost to finish) move only when the series'
  coarse step moves (every 20 attempts here), never with one attempt; once it ended, the exact figures show;
- a look that names a held-out case (alone, or beside a working one) is refused with HOLDOUT_LOOK_REFUSED before
  anything runs (no series, attempt, run or spend), over REST and by `aqven look`;
- the control: a dev series shows its spend and counts per attempt, exactly, and a look on working cases runs.
"""

from __future__ import annotations

import itertools
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from aqven.project.split import side_of
from support.commands import aqven, cli_env
from support.live_server import LiveServer
from support.series_kit import PACKAGE, attempts, case_names, first_on, rows, run_order, wait_until, write_tiny

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


def test_a_look_naming_a_held_out_case_is_refused_before_anything_runs(
    tiny_env: Path, hold: Path, tmp_path: Path
) -> None:
    held = [first_on("holdout", "fail", i * 1000) for i in range(3)]
    dev = case_names(2, 0, prefix="d")
    root = write_tiny(tmp_path / "tiny", [*dev, *held])
    (hold / "open").touch()

    def nothing_ran() -> tuple[int, int, int]:
        return tuple(  # type: ignore[return-value]
            rows(root, f"SELECT COUNT(*) AS n FROM {table}")[0]["n"] for table in ("series", "attempts", "runs")
        )

    with LiveServer(root, cli_env()) as server:
        before = nothing_ran()
        for named in ([held[0]], [dev[0], held[1]], held):
            look = {"flow_id": "answer", "dataset_id": "cases", "case_names": named}
            code, _h, body = server.call("POST", "/api/series", {"look": look, "simulate": True})
            assert code == 403, body
            error = body["error"]
            assert error["code"] == "HOLDOUT_LOOK_REFUSED"
            assert "held out" in error["message"] and "nothing ran" in error["message"]
            assert "dev" in error["hint"] and '"on": "holdout"' in error["hint"]
            assert not [n for n in [*held, *dev] if n in json.dumps(body)]  # names no case, not even the sent ones
        # A look needs named cases: none is a validation error, before anything runs.
        code, _h, body = server.call(
            "POST", "/api/series", {"look": {"flow_id": "answer", "dataset_id": "cases", "case_names": []}}
        )
        assert code == 422, body
        assert nothing_ran() == before == (0, 0, 0)

        # `aqven look` says it and exits 1 (an error, as documented).
        cli = aqven("look", "answer", "--dataset", "cases", "--case", held[0], "--simulate", cwd=root)
        assert cli.returncode == 1, cli.stdout + cli.stderr
        assert "HOLDOUT_LOOK_REFUSED" in cli.stderr and "nothing ran" in cli.stderr and "hint" in cli.stderr
        assert nothing_ran() == before

        # The control: a look on working cases runs.
        look = {"flow_id": "answer", "dataset_id": "cases", "case_names": dev}
        code, _h, body = server.call("POST", "/api/series", {"look": look, "simulate": True})
        assert code == 201, body
        sid = body["series"]["series_id"]
        done = wait_until(lambda: (s := server.get(f"/api/series/{sid}?wait_seconds=5"))["ended_at"] and s)
        assert done["status"] == "done" and done["progress"]["done"] == 2
