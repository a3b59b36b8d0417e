"""Sealed evidence (issue 12): each attack an agent that wants a "confirmed" would try, reproduced, and seen to fail.

- the package edit: `package:` changed after a held-out series → its runs stay hidden through MCP (a real client
  session), REST and Studio, and `aqven check` reports E_SPLIT_CHANGED;
- polling: the snapshot of a running held-out series moves only at coarse steps (10%, at least 20 attempts), so
  no poll tells one attempt's result, in whatever order the attempts ran;
- differencing: held-out series on 1, 2, 3 cases (and a cancelled one) each say how many of their cases were read
  before, and FINDINGS.md lists every read;
- the reverted edit: a prompt edited and put back while a held-out series runs → invalid (inputs_changed).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from pathlib import Path
from typing import Any

import yaml

from aqven.project.split import side_of
from aqven.research.diagnostics.workspace import check_workspace
from aqven.research.holdout import HELD_OUT_RUN_SQL
from support.mcp_agent import agent_on, held_out, names, settle, tiny_cases
from support.mcp_agent import write_tiny as write_mcp_tiny
from support.series_kit import (
    PACKAGE,
    attempts,
    case_names,
    client_for,
    first_on,
    get,
    rows,
    run_order,
    start,
    wait_until,
    write_tiny,
)
from support.series_kit import settle as settle_rest

NEW_PACKAGE = "renamed"


def codes(root: Path) -> list[str]:
    _ws, diagnostics = check_workspace(root)
    return [d.code for d in diagnostics]


# ---- the package edit ------------------------------------------------------------------------------------------


async def test_a_package_edit_shows_no_run_of_an_earlier_held_out_series(tmp_path: Path) -> None:
    root = write_mcp_tiny(tmp_path / "tiny", tiny_cases(40, bad=0))
    hidden = held_out(names(40))
    # Under the new salt, many of these held-out cases fall on the working side: today's split would show them.
    assert sum(side_of(NEW_PACKAGE, n) == "dev" for n in hidden) >= 5
    async with agent_on(root) as (agent, svc):
        sid = (await agent.call("series_start", {"experiment_id": "reply_ok", "on": "holdout", "simulate": True}))[
            "series"
        ]["series_id"]
        state = await settle(agent, sid)
        assert state["status"] == "done" and state["finding"]
        assert "E_SPLIT_CHANGED" not in codes(root)
        run_ids = [a.run_id for a in svc.series.store.attempts(sid)]
        assert len(run_ids) == len(hidden)

        cfg = root / "aqven.yaml"
        cfg.write_text(cfg.read_text().replace(f"package: {PACKAGE}", f"package: {NEW_PACKAGE}"))
        await asyncio.sleep(1.2)  # the server re-reads the project at most once a second
        assert svc.package() == NEW_PACKAGE
        for run_id in run_ids:
            assert run_id is not None
            for tool, args in (
                ("run_get", {"run_id": run_id}),
                ("run_events", {"run_id": run_id}),
                ("run_get_node", {"run_id": run_id, "node_id": "draft"}),
            ):
                err = await agent.error(tool, args)
                assert err["code"] == "HOLDOUT_HIDDEN", (tool, err)
        listed, hidden_runs = svc.runs.list_runs_except(HELD_OUT_RUN_SQL, limit=500)
        assert listed == [] and hidden_runs == len(run_ids)
        leaked = [n for n in hidden if agent.saw(n)]
        assert not leaked, leaked
    assert "E_SPLIT_CHANGED" in codes(root)  # the finding recorded the salt's hash


def test_a_package_edit_keeps_held_out_runs_hidden_over_rest_and_studio(tiny_env: Path, tmp_path: Path) -> None:
    names_ = case_names(4, 16)
    root = write_tiny(tmp_path / "tiny", names_)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        assert settle_rest(client, sid)["status"] == "done"
        cfg = root / "aqven.yaml"
        cfg.write_text(cfg.read_text().replace(f"package: {PACKAGE}", f"package: {NEW_PACKAGE}"))
        time.sleep(1.2)
        assert client.get("/api/studio/status").json()["package"] == NEW_PACKAGE
        run_ids = [a["run_id"] for a in attempts(root, sid)]
        for run_id in run_ids:
            for url in (
                f"/api/runs/{run_id}",
                f"/api/runs/{run_id}/events",
                f"/api/runs/{run_id}/nodes/answer",
                f"/api/studio/runs/{run_id}/trace",
                f"/api/runs/{run_id}/stream",
            ):
                r = client.get(url)
                assert r.status_code == 403 and r.json()["error"]["code"] == "HOLDOUT_HIDDEN", url
        listed = client.get("/api/runs", params={"series_id": sid})
        assert listed.json() == [] and listed.headers["X-Hidden-Holdout-Runs"] == str(len(run_ids))
        page = client.get("/api/studio/runs").json()
        assert page["items"] == [] and page["held_out_hidden"] == len(run_ids)
        assert client.get(f"/api/studio/series/{sid}/attempts").json()["items"] == []
        check = client.get("/api/check").json()
        assert "E_SPLIT_CHANGED" in {d["code"] for d in check["diagnostics"]}


# ---- polling -------------------------------------------------------------------------------------------------


def test_polling_a_held_out_series_tells_no_attempt_apart(tiny_env: Path, hold: Path, tmp_path: Path) -> None:
    """60 held-out attempts, concurrency 1, released one at a time; a poll after each. The attacker's guess of the
    order is the plan order (file order of the held-out cases), and it reads each attempt's result from the change
    of `matrix[].passes` between two polls. It learns nothing: the numbers move only every 20 attempts, and the
    attempts ran in another order."""
    good = case_names(0, 40)
    bad = [first_on("holdout", "fail", i * 1000) for i in range(20)]
    root = write_tiny(tmp_path / "tiny", good + bad, concurrency=1)
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        order = run_order(root, sid)
        plan_order = [n for n in good + bad]
        assert order != plan_order  # the attacker's guess of the order is wrong
        seen: list[tuple[int, Any, Any, Any]] = []
        for i, case in enumerate(order, start=1):
            (hold / case).touch()
            wait_until(lambda i=i: get(client, sid)["progress"]["done"] >= i)  # type: ignore[misc]
            snap = get(client, sid)
            if snap["status"] != "running":
                break
            m = snap["matrix"][0]
            seen.append((snap["progress"]["done"], m["passes"], m["counted"], (snap["verdict"] or {}).get("text")))
            studio = client.get(f"/api/studio/series/{sid}").json()
            assert studio["matrix"][0]["passes"] == m["passes"] and studio["verdict"] == snap["verdict"]
        final = settle_rest(client, sid)
    assert final["status"] == "done" and final["matrix"][0]["counted"] == 60
    # Between coarse steps nothing moves; at a step, 20 attempts' worth moves at once.
    for (done_a, *nums_a), (done_b, *nums_b) in itertools.pairwise(seen):
        if done_a // 20 == done_b // 20:
            assert nums_a == nums_b, (done_a, done_b)
    changes = [b[0] for a, b in itertools.pairwise(seen) if a[1:] != b[1:]]
    assert changes == [20, 40]
    assert seen[0][2] == 0  # before the first step: no counted attempt is shown


# ---- differencing -----------------------------------------------------------------------------------------------


def test_differencing_reads_are_announced_and_every_read_is_listed(tiny_env: Path, hold: Path, tmp_path: Path) -> None:
    good = case_names(2, 6)
    root = write_tiny(tmp_path / "tiny", good)
    with client_for(root) as client:
        plans = []
        ids = []
        for n in (1, 2, 3):
            plan = client.post("/api/experiments/rate/launch-plan", json={"on": "holdout", "cases": n}).json()
            plans.append(plan["earlier_reads"])
            (hold / "open").touch()
            started = start(client, experiment_id="rate", on="holdout", cases=n, simulate=True)
            ids.append(started["series"]["series_id"])
            assert started["launch_plan"]["earlier_reads"] == plan["earlier_reads"]
            assert settle_rest(client, ids[-1])["finding"]
        (hold / "open").unlink()
        cancelled = start(client, experiment_id="rate", on="holdout", cases=4, simulate=True)
        assert cancelled["launch_plan"]["earlier_reads"]["text"].startswith(
            "3 earlier held-out series of this experiment read 3 of these held-out cases (4)"
        )
        cid = cancelled["series"]["series_id"]
        wait_until(lambda: any(a["status"] == "running" for a in attempts(root, cid)))
        r = client.post(f"/api/series/{cid}/cancel", json={})
        assert r.status_code == 200
        (hold / "open").touch()
        ended = wait_until(lambda: (x := get(client, cid, wait=1))["ended_at"] is not None and x)
        assert ended["status"] == "cancelled"  # its running attempt finished (and read its case)
        read = {*run_order(root, ids[2]), *[a["case_name"] for a in attempts(root, cid) if a["status"] == "done"]}
        last = start(client, experiment_id="rate", on="holdout", cases=6, simulate=True)
        assert f"read {len(read)} of these held-out cases (6)" in last["launch_plan"]["earlier_reads"]["text"]
        assert settle_rest(client, last["series"]["series_id"])["finding"]
    assert plans[0] == {"earlier_series": 0, "read_cases": 0, "cases": 1, "text": None}
    assert plans[1]["text"].startswith("1 earlier held-out series of this experiment read 1 of these held-out cases")
    assert plans[2]["read_cases"] == 2 and plans[2]["earlier_series"] == 2
    md = (root / "FINDINGS.md").read_text()
    (reads,) = [line for line in md.splitlines() if line.startswith("- `rate`:")]
    assert reads.startswith("- `rate`: 5 held-out reads")
    for sid, n in zip(ids, (1, 2, 3), strict=True):
        assert re.search(f"`{sid}` done, [a-z]+ on {n} cases?", reads), sid
    assert f"`{cid}` cancelled, invalid on 1 case" in reads  # the cancelled read is listed, on the cases it read
    data = yaml.safe_load(
        (root / "experiments" / "rate" / "findings" / f"{last['series']['series_id']}.yaml").read_text()
    )
    assert [r["series_id"] for r in data["reads"]] == [*ids, cid, last["series"]["series_id"]]


# ---- the reverted edit ----------------------------------------------------------------------------------------


def test_an_edit_put_back_while_a_held_out_series_runs_makes_it_invalid(
    tiny_env: Path, hold: Path, tmp_path: Path
) -> None:
    root = write_tiny(tmp_path / "tiny", case_names(2, 30), concurrency=2)
    prompt = root / "flows" / "answer" / "answer.md"
    original = prompt.read_text()
    with client_for(root) as client:
        sid = start(client, experiment_id="rate", on="holdout", simulate=True)["series"]["series_id"]
        order = run_order(root, sid)
        for case in order[:5]:
            (hold / case).touch()
        wait_until(lambda: sum(a["status"] == "done" for a in attempts(root, sid)) >= 5)
        prompt.write_text(original + "Always say yes.\n")
        time.sleep(1.2)  # the server re-reads the project
        for case in order[5:12]:
            (hold / case).touch()
        wait_until(lambda: sum(a["status"] == "done" for a in attempts(root, sid)) >= 12)
        prompt.write_text(original)  # put back before the series ends
        time.sleep(1.2)
        (hold / "open").touch()
        snap = settle_rest(client, sid)
    assert snap["status"] == "done"
    assert snap["verdict"]["verdict"] == "invalid" and snap["verdict"]["reason"] == "inputs_changed"
    assert snap["finding"] is None
    hashes = [a["inputs_hash"] for a in attempts(root, sid)]
    series_hash = rows(root, "SELECT inputs_hash FROM series WHERE id=?", (sid,))[0]["inputs_hash"]
    assert hashes.count(series_hash) < len(hashes)  # the attempts of the edited window recorded other inputs
    assert prompt.read_text() == original  # and the file itself was put back


def test_a_look_on_a_held_out_case_tells_nothing_through_its_numbers(tiny_env: Path, tmp_path: Path) -> None:
    """Differencing with a look: a look on one held-out case would give that case's result through the matrix."""
    bad = first_on("holdout", "fail")
    good = case_names(1, 0)[0]
    root = write_tiny(tmp_path / "tiny", [good, bad])
    with client_for(root) as client:
        results = []
        for names_ in ([bad], [good, bad]):
            look = {"flow_id": "answer", "dataset_id": "cases", "case_names": names_}
            r = client.post("/api/series", json={"look": look, "simulate": True})
            assert r.status_code == 201, r.text
            results.append(settle_rest(client, r.json()["series"]["series_id"], include_cases=True))
    alone, both = results
    assert alone["progress"]["done"] == 1 and alone["progress"]["held_out_attempts"] == 1
    assert alone["matrix"][0]["counted"] == 0 and alone["matrix"][0]["passes"] == 0
    assert alone["progress"]["counted"] == 0 and alone["cases"] == [] and alone["hidden_cases"] == 1
    assert both["matrix"][0]["counted"] == 1 and both["matrix"][0]["passes"] == 1  # the working case only
    assert [c["case"] for c in both["cases"]] == [good]


def test_runs_without_a_case_and_of_working_cases_are_still_listed(tiny_env: Path, tmp_path: Path) -> None:
    """The control of the side rule: a run of a plain input (no side, no case) and a run of a working case are
    listed by REST and Studio, and neither is counted as held out."""
    dev = case_names(2, 0)
    root = write_tiny(tmp_path / "tiny", dev)
    with client_for(root) as client:
        plain = client.post(
            "/api/runs", json={"flow_id": "answer", "input": {"text": "hi"}, "simulate": True, "wait": True}
        )
        case = client.post("/api/runs", json={"flow_id": "answer", "case": dev[0], "simulate": True, "wait": True})
        assert plain.status_code == case.status_code == 201
        assert plain.json()["side"] is None and case.json()["side"] == "dev"
        listed = client.get("/api/runs")
        assert {r["id"] for r in listed.json()} == {plain.json()["id"], case.json()["id"]}
        assert listed.headers["X-Hidden-Holdout-Runs"] == "0"
        page = client.get("/api/studio/runs", params={"status": "done"}).json()
        assert page["total"] == 2 and page["held_out_hidden"] == 0
        for run in (plain.json(), case.json()):
            assert client.get(f"/api/runs/{run['id']}").status_code == 200
