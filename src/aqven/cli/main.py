"""The `aqven` command: a thin client of the project server, plus `init`, `check` and `serve`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from aqven.cli.project_args import fail, project_root
from aqven.cli.render import console, err_console, run_summary
from aqven.errors import AqvenError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="AQVEN: make LLM flows reliable in rounds.",
)
prices_app = typer.Typer(no_args_is_help=True, help="Model price list.")
app.add_typer(prices_app, name="prices")

cap_app = typer.Typer(no_args_is_help=True, help="The project spend cap a person confirmed.")
app.add_typer(cap_app, name="cap")

from aqven.cli.dataset_cmd import dataset_app  # noqa: E402 - registered with the app it belongs to
from aqven.cli.series_group import RUN, RunCommand, SeriesGroup  # noqa: E402
from aqven.cli.store_cmd import store_app  # noqa: E402
from aqven.cli.worker_cmd import worker as worker_cmd  # noqa: E402
from aqven.cli.worker_cmd import workers as workers_cmd  # noqa: E402

app.add_typer(dataset_app, name="dataset")
app.add_typer(store_app, name="store")
app.command("worker")(worker_cmd)
app.command("workers")(workers_cmd)

SERIES_HELP = (
    "Run EXPERIMENT as a series and print its verdict (exit 0 done, 1 cancelled/failed, 3 approval, 4 person, "
    "5 a verdict --fail-on lists); `aqven series list` lists series, `aqven series follow ID` follows one again."
)
series_app = typer.Typer(cls=SeriesGroup, no_args_is_help=True, help=SERIES_HELP)
app.add_typer(series_app, name="series")

server_app = typer.Typer(
    no_args_is_help=True,
    help="The project server that `aqven` commands start in the background: is it running (status), stop it.",
)
app.add_typer(server_app, name="server")
YesOpt = Annotated[
    bool, typer.Option("--yes", help="act without asking (no terminal to ask at); recorded as --yes, not as a tty")
]

RootOpt = Annotated[Path | None, typer.Option("--root", help="the project folder (default: found from here)")]


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="folder to create")],
    package: Annotated[str | None, typer.Option(help="package name; the salt of the dev/holdout split")] = None,
) -> None:
    """Create the showcase project in DIRECTORY."""
    from aqven.project.init import init_project

    try:
        target = init_project(directory, package)
    except AqvenError as err:
        fail(err)
    console.print(f"created the showcase project in {target}")
    console.print(
        f"next: cd {directory} && aqven check && aqven run support_case --case strip_flicker_credit --simulate"
    )


@app.command()
def check(
    as_json: Annotated[bool, typer.Option("--json", help="print diagnostics as JSON")] = False,
    github: Annotated[
        bool, typer.Option("--github", help="also print each diagnostic as a GitHub Actions annotation")
    ] = False,
    root: RootOpt = None,
) -> None:
    """Validate the project's files; exit 1 on errors."""
    from aqven.cli.gate import github_annotation
    from aqven.models.served import served_model_diagnostics
    from aqven.project.diagnostics import sort_key
    from aqven.research.diagnostics.workspace import check_workspace

    where = project_root(root)
    ws, diagnostics = check_workspace(where)
    diagnostics = sorted([*diagnostics, *served_model_diagnostics(ws.project)], key=sort_key)
    if github:
        for d in diagnostics:
            print(github_annotation(d, where))
    errors = sum(d.severity == "error" for d in diagnostics)
    if as_json:
        print(
            json.dumps(
                {
                    "ok": errors == 0,
                    "errors": errors,
                    "warnings": len(diagnostics) - errors,
                    "diagnostics": [d.model_dump() for d in diagnostics],
                }
            )
        )
    else:
        for d in diagnostics:
            (err_console if d.severity == "error" else console).print(d.render(), markup=False)
        summary = f"{errors} error(s), {len(diagnostics) - errors} warning(s)"
        console.print(("[red]" if errors else "[green]") + summary + ("[/red]" if errors else "[/green]"))
    raise typer.Exit(1 if errors else 0)


@app.command()
def run(
    flow: Annotated[str, typer.Argument(help="the flow to run")],
    case: Annotated[str | None, typer.Option(help="a dataset case to run on")] = None,
    dataset: Annotated[str | None, typer.Option(help="the dataset of --case, when names repeat")] = None,
    input_json: Annotated[str | None, typer.Option("--input", help="the flow's input as JSON")] = None,
    from_node: Annotated[str | None, typer.Option("--from", help="first top-level node to run")] = None,
    to_node: Annotated[str | None, typer.Option("--to", help="last top-level node to run")] = None,
    simulate: Annotated[bool, typer.Option("--simulate", help="answer with the agents' simulators")] = False,
    seed: Annotated[int | None, typer.Option(help="seed for simulators")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the run as JSON")] = False,
    root: RootOpt = None,
) -> None:
    """Run FLOW on a case or an input and print its trace summary (exit 0 done, 1 failed, 4 waiting)."""
    from aqven.cli.background import connect

    if (case is None) == (input_json is None):
        fail(
            AqvenError(
                "give exactly one of --case or --input",
                code="VALIDATION_ERROR",
                hint="aqven run support_case --case strip_flicker_credit",
            )
        )
    body: dict[str, Any] = {"flow_id": flow, "simulate": simulate, "wait": True, "wait_seconds": 600}
    if case is not None:
        body["case"] = case
    if dataset is not None:
        body["dataset_id"] = dataset
    if input_json is not None:
        try:
            body["input"] = json.loads(input_json)
        except json.JSONDecodeError as exc:
            fail(
                AqvenError(
                    f"--input is not valid JSON: {exc.msg} at column {exc.colno}",
                    code="VALIDATION_ERROR",
                    hint="""quote it for the shell: --input '{"ticket": "..."}'""",
                )
            )
    for key, value in (("from_node", from_node), ("to_node", to_node), ("seed", seed)):
        if value is not None:
            body[key] = value
    try:
        client = connect(project_root(root))
        record = client.post("/api/runs", body)
        events = client.get(f"/api/runs/{record['id']}/events", limit=5000)
    except AqvenError as err:
        fail(err, 1 if err.http_status in (404, 409, 422) else 2)
    if as_json:
        print(json.dumps(record))
    else:
        run_summary(record, events)
    raise typer.Exit({"done": 0, "failed": 1, "waiting_human": 4}.get(record["status"], 1))


@series_app.command(
    RUN,
    cls=RunCommand,
    hidden=True,
    help=SERIES_HELP,
    epilog=(
        "Also: `aqven series list [--experiment ID] [--limit N] [--json]` lists the project's series, newest first; "
        "`aqven series follow SERIES` waits for one again, with the same exit codes. An experiment named list or "
        "follow runs with -- before its name: `aqven series -- list`."
    ),
)
def series(
    experiment: Annotated[str, typer.Argument(help="the experiment to run")],
    on: Annotated[str, typer.Option(help="dev (working cases) or holdout")] = "dev",
    cases: Annotated[int | None, typer.Option(help="the first N cases of that half")] = None,
    repeats: Annotated[int | None, typer.Option(help="repeats per case and variant (at most 20)")] = None,
    cap: Annotated[str | None, typer.Option(help="the series' own spend cap in USD")] = None,
    simulate: Annotated[bool, typer.Option("--simulate", help="answer with the agents' simulators")] = False,
    client_op_id: Annotated[str | None, typer.Option(help="idempotency key: the same key starts one series")] = None,
    seed: Annotated[
        int | None, typer.Option(help="the simulators' seed, to replay a series on purpose (drawn when left out)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the final state as one JSON line")] = False,
    fail_on: Annotated[
        str | None,
        typer.Option(
            help="CI gate: exit 5 when the done series' verdict is one of these "
            "(e.g. refuted,inconclusive,invalid; a dev signal counts as the verdict it would be)"
        ),
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="write a JUnit XML report of the series to this file")] = None,
    summary: Annotated[
        Path | None,
        typer.Option(help="write a Markdown summary to this file (also appended to $GITHUB_STEP_SUMMARY when set)"),
    ] = None,
    root: RootOpt = None,
) -> None:
    from aqven.cli.background import connect
    from aqven.cli.gate import parse_fail_on
    from aqven.cli.series_cmd import Gate, start_and_follow

    if on not in ("dev", "holdout"):
        fail(
            AqvenError(
                f"--on must be dev or holdout, not {on!r}",
                code="VALIDATION_ERROR",
                hint="explore on dev; confirm once on holdout",
            )
        )
    body: dict[str, Any] = {"experiment_id": experiment, "on": on, "simulate": simulate}
    for key, value in (
        ("cases", cases),
        ("repeats", repeats),
        ("cap_usd", cap),
        ("client_op_id", client_op_id),
        ("seed", seed),
    ):
        if value is not None:
            body[key] = value
    try:
        gate = Gate(fail_on=parse_fail_on(fail_on), junit=junit, summary=summary)
    except AqvenError as err:
        fail(err)
    try:
        code = start_and_follow(connect(project_root(root)), body, as_json=as_json, gate=gate)
    except AqvenError as err:
        _show_problems(err)
        fail(err, 1)
    raise typer.Exit(code)


@series_app.command("list")
def series_list(
    experiment: Annotated[str | None, typer.Option("--experiment", help="only the series of this experiment")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="at most this many, newest first")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="print the list as JSON")] = False,
    root: RootOpt = None,
) -> None:
    """List the project's series, newest first: id, experiment, side, status, verdict, spend of cap, created."""
    from aqven.cli.background import connect
    from aqven.cli.series_cmd import print_series_list, series_rows

    where = project_root(root)
    try:
        client = connect(where)
        rows = series_rows(client, experiment, limit)
    except AqvenError as err:
        fail(err, 1 if err.http_status == 404 else 2)
    if as_json:
        print(json.dumps(rows))
    else:
        print_series_list(client, rows)
    raise typer.Exit(0)


@series_app.command("follow")
def series_follow(
    series_id: Annotated[str, typer.Argument(help="the series to follow (`aqven series list` lists them)")],
    as_json: Annotated[bool, typer.Option("--json", help="print the final state as one JSON line")] = False,
    fail_on: Annotated[
        str | None, typer.Option(help="CI gate: exit 5 when the done series' verdict is one of these")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="write a JUnit XML report of the series to this file")] = None,
    summary: Annotated[Path | None, typer.Option(help="write a Markdown summary to this file")] = None,
    root: RootOpt = None,
) -> None:
    """Wait for a series that runs on the server (started earlier, or left by Ctrl-C) and print its verdict, with
    the exit codes of `aqven series` (0 done, 1 cancelled/failed, 3 approval, 4 person, 5 --fail-on)."""
    from aqven.cli.background import connect
    from aqven.cli.gate import parse_fail_on
    from aqven.cli.series_cmd import Gate, follow_again

    try:
        gate = Gate(fail_on=parse_fail_on(fail_on), junit=junit, summary=summary)
    except AqvenError as err:
        fail(err)
    try:
        code = follow_again(connect(project_root(root)), series_id, as_json=as_json, gate=gate)
    except AqvenError as err:
        fail(err, 1)
    raise typer.Exit(code)


def _show_problems(err: AqvenError) -> None:
    for p in (err.details or {}).get("problems", [])[:20]:
        where = f"{p.get('file')}:{p.get('line')}: " if p.get("file") else ""
        who = f"case {p['case']} × variant {p['variant']}: " if p.get("case") else ""
        err_console.print(f"  {where}{who}{p.get('code')}: {p.get('message')}", markup=False)


@app.command()
def look(
    flow: Annotated[str, typer.Argument(help="the flow to look at")],
    dataset: Annotated[str, typer.Option(help="the dataset of the cases")],
    case: Annotated[list[str], typer.Option("--case", help="a case name (repeat the option)")],
    from_node: Annotated[str | None, typer.Option("--from", help="first top-level node")] = None,
    to_node: Annotated[str | None, typer.Option("--to", help="last top-level node")] = None,
    simulate: Annotated[bool, typer.Option("--simulate", help="answer with the agents' simulators")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the final state as one JSON line")] = False,
    root: RootOpt = None,
) -> None:
    """Run FLOW once on each named case and show each working case's outcome and a short trace (nodes, models,
    tokens, cost): no verdict, no finding, no checks (checks belong to an experiment: `aqven series`)."""
    from aqven.cli.background import connect
    from aqven.cli.series_cmd import INTERRUPTED, left_running, print_look, start_and_follow

    body = {
        "look": {
            "flow_id": flow,
            "dataset_id": dataset,
            "case_names": case,
            "start_node": from_node,
            "end_node": to_node,
        },
        "simulate": simulate,
    }
    try:
        client = connect(project_root(root))
        code = start_and_follow(client, body, as_json=True) if as_json else None
        if code is None:
            started = client.post("/api/series", body)
            sid = started["series"]["series_id"]
            try:
                state = client.get(f"/api/series/{sid}", wait_seconds=50, include_cases="true")
                while state["status"] not in ("done", "cancelled", "failed", "awaiting_approval", "waiting_human"):
                    state = client.get(f"/api/series/{sid}", wait_seconds=50, include_cases="true")
            except KeyboardInterrupt:
                left_running(client, sid)
                raise typer.Exit(INTERRUPTED) from None
            print_look(client, state)
            code = {"done": 0, "awaiting_approval": 3, "waiting_human": 4}.get(state["status"], 1)
    except AqvenError as err:
        _show_problems(err)
        fail(err, 1)
    raise typer.Exit(code)


def _series_action(path: str, body: dict[str, Any], root: Path | None, *, yes: bool = False) -> None:
    from aqven.cli import approve_cmd
    from aqven.cli.background import connect
    from aqven.cli.series_cmd import report

    sid = path.split("/")[3]
    try:
        client = connect(project_root(root))
        if path.endswith("/approve"):
            state = approve_cmd.approve(client, sid, body.get("cap_usd"), yes=yes, token_cap=body.get("token_cap"))
        elif path.endswith("/stop"):
            state = approve_cmd.stop(client, sid, yes=yes)
        else:
            state = client.post(path, body)
    except AqvenError as err:
        fail(err, 1 if err.code != "CONFIRMATION_REQUIRED" else 2)
    if path.endswith("/approve") and state["status"] == "running":
        by = (state.get("approvals") or [{}])[-1].get("person")
        console.print(
            f"approved{f' by {by}' if by else ''}: series {state['series_id']} runs on under a cap of "
            f"${state['spend']['cap_usd']}"
        )
        from aqven.cli.series_cmd import follow

        state = follow(client, state["series_id"], quiet=False)
        raise typer.Exit(report(client, state))  # followed to its end: the exit codes of `aqven series`
    code = report(client, state)
    if path.endswith(("/cancel", "/stop")) and state["status"] in ("cancelled", "done"):
        code = 0  # the act succeeded: the series is cancelled, or stopped at its cap (its verdict is invalid)
    raise typer.Exit(code)


@app.command()
def approve(
    series_id: Annotated[str, typer.Argument(help="the paused series")],
    cap: Annotated[str | None, typer.Option(help="the new cap in USD (default: double the old one)")] = None,
    token_cap: Annotated[
        int | None, typer.Option(help="a series paused near its token cap: the new token cap (default: double)")
    ] = None,
    yes: YesOpt = False,
    root: RootOpt = None,
) -> None:
    """Continue a series paused at its cap, with a higher cap, and follow it to its verdict (asks first)."""
    body: dict[str, Any] = {"cap_usd": cap} if cap else {}
    if token_cap is not None:
        body["token_cap"] = token_cap
    _series_action(f"/api/series/{series_id}/approve", body, root, yes=yes)


@app.command()
def stop(
    series_id: Annotated[str, typer.Argument(help="the paused series")], yes: YesOpt = False, root: RootOpt = None
) -> None:
    """Stop a series paused at its cap: its verdict is invalid (stopped by the spend cap). Asks first."""
    _series_action(f"/api/series/{series_id}/stop", {}, root, yes=yes)


@cap_app.command("confirm")
def cap_confirm(yes: YesOpt = False, root: RootOpt = None) -> None:
    """Confirm the project cap aqven.yaml asks for, when it raised it: new series get it from then on."""
    from aqven.cli import approve_cmd
    from aqven.cli.background import connect

    try:
        code = approve_cmd.confirm_cap(connect(project_root(root)), yes=yes)
    except AqvenError as err:
        fail(err, 1 if err.code != "CONFIRMATION_REQUIRED" else 2)
    raise typer.Exit(code)


@app.command()
def cancel(
    series_id: Annotated[str, typer.Argument(help="the series to cancel")],
    reason: Annotated[str | None, typer.Option(help="why, for the record")] = None,
    root: RootOpt = None,
) -> None:
    """Cancel a series: queued attempts never start, running ones finish; no finding."""
    _series_action(f"/api/series/{series_id}/cancel", {"reason": reason} if reason else {}, root)


@app.command()
def serve(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0: a free one)")] = 0,
    store: Annotated[
        str | None,
        typer.Option(
            help="the store: postgresql://USER@HOST:PORT/DATABASE or sqlite:PATH (default: store: in"
            " .aqven/local.yaml, AQVEN_STORE, else .aqven/aqven.sqlite)"
        ),
    ] = None,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="hand attempts to the `aqven worker`s of the shared PostgreSQL store instead of running them here",
        ),
    ] = False,
    root: RootOpt = None,
) -> None:
    """Run the project server in the foreground."""
    import os

    from aqven.research.cluster.queue import CLUSTER_ENV
    from aqven.server.lifecycle import serve as run_server
    from aqven.store.location import STORE_ENV, parse_store

    where = project_root(root)
    try:
        if store is not None:
            parse_store(store, root=where, source="--store")  # refused here, before the server starts
            os.environ[STORE_ENV] = store  # the server and its workers read it
        if cluster:
            _cluster_ready(where)  # refused here, before the server starts: a store not shared, DBOS missing
            os.environ[CLUSTER_ENV] = "1"  # the series runner hands attempts to the store's workers
        run_server(where, port)
    except AqvenError as err:
        fail(err)


def _cluster_ready(root: Path) -> None:
    from aqven.errors import CLUSTER_NEEDS_POSTGRES, CLUSTER_UNAVAILABLE
    from aqven.store.location import store_of

    if store_of(root).dsn is None:
        raise AqvenError(
            "--cluster hands attempts to `aqven worker`s through the project's shared PostgreSQL store; this store"
            " is SQLite",
            code=CLUSTER_NEEDS_POSTGRES,
            hint="aqven serve --store postgresql://USER@HOST:PORT/DATABASE --cluster"
            " (docs/how-to/run-on-several-machines.md)",
        )
    try:
        import dbos  # noqa: F401
    except ImportError:
        raise AqvenError(
            "--cluster needs DBOS, which is not installed",
            code=CLUSTER_UNAVAILABLE,
            hint="pip install 'aqven[cluster]'",
        ) from None


@server_app.command("status")
def server_status(
    as_json: Annotated[
        bool, typer.Option("--json", help="print the server's record as JSON (never its token)")
    ] = False,
    root: RootOpt = None,
) -> None:
    """Is a project server running for this project: pid, port, since, version, store (exit 0 running, 1 not)."""
    from aqven.cli.background import root_option, since
    from aqven.project.paths import state_dir
    from aqven.server.lifecycle import read_server

    where = project_root(root)
    info = read_server(where)
    if info is None:
        if as_json:
            print(json.dumps({"running": False}))
        else:
            console.print(f"no server running for the project in {where}", markup=False)
        raise typer.Exit(1)
    active = _active_series(where, info)
    record = {
        "running": True,
        "pid": info.get("pid"),
        "port": info.get("port"),
        "started_at": info.get("started_at"),
        "version": info.get("version"),
        "root": info.get("root"),
        "store": info.get("store") or _store_shown(where),
        "log": str(state_dir(where) / "server.log"),
        "healthy": bool(info.get("healthy")),
        "active_series": active,
    }
    if as_json:
        print(json.dumps(record))
        raise typer.Exit(0)
    state = "" if record["healthy"] else " (starting: it does not answer yet)"
    console.print(f"the project server runs{state}: pid {record['pid']}, port {record['port']}", markup=False)
    console.print(f"  since    {since(record['started_at'])}", markup=False)
    console.print(f"  version  {record['version']}", markup=False)
    console.print(f"  project  {record['root']}", markup=False)
    console.print(f"  store    {record['store']}", markup=False)
    console.print(f"  log      {record['log']}", markup=False)
    if active is not None:
        console.print(f"  series   {len(active)} active" + (f": {', '.join(active)}" if active else ""), markup=False)
    console.print(f"stop it: aqven server stop{root_option(where)}", markup=False)
    raise typer.Exit(0)


def _store_shown(root: Path) -> str:
    """The project's store as it may be shown (a DSN without its password)."""
    from aqven.store.location import store_of

    try:
        return store_of(root).shown
    except AqvenError as err:
        return f"({err.code})"


def _active_series(root: Path, info: dict[str, Any]) -> list[str] | None:
    """The ids of the series still running or waiting on that server (None when it cannot be asked)."""
    from aqven.server.client import Client

    if not info.get("healthy"):
        return None
    client = Client(root, start=False)
    client.port, client.token = int(info["port"]), str(info.get("token") or "")
    try:
        items = client.request("GET", "/api/series", query={"limit": 500}, timeout=5.0)
    except AqvenError:
        return None
    return [str(s["series_id"]) for s in items if s.get("active")]


@server_app.command("stop")
def server_stop(root: RootOpt = None) -> None:
    """Stop the project server (SIGTERM, then wait until it is gone); 'no server running' when none runs. Series it
    was running pause and resume when a server starts again (any aqven command starts one)."""
    from aqven.server.lifecycle import read_server, stop_server

    where = project_root(root)
    info = read_server(where)
    if info is None:
        console.print("no server running for this project", markup=False)
        raise typer.Exit(0)
    active = _active_series(where, info) or []
    try:
        stopped = stop_server(where)
    except AqvenError as err:
        fail(err, 1)
    if stopped is None:
        console.print("no server running for this project", markup=False)
        raise typer.Exit(0)
    console.print(f"stopped the project server (pid {stopped['pid']}, port {stopped['port']})", markup=False)
    if active:
        console.print(
            f"{len(active)} series did not end ({', '.join(active)}): each goes on where it was when a server "
            f"starts again (`aqven series follow {active[0]}` starts one)",
            markup=False,
        )
    raise typer.Exit(0)


@prices_app.command("update")
def prices_update() -> None:
    """Refresh the cached OpenRouter model price list (needs the network)."""
    import asyncio

    from aqven.models.pricing import update_price_list

    try:
        count = asyncio.run(update_price_list())
    except AqvenError as err:
        fail(err)
    console.print(f"cached prices of {count} models")


@app.command()
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="where to create the demo project")] = Path("aqven-demo"),
) -> None:
    """The offline demo: a real series on simulated models, from launch plan to verdict and finding."""
    from aqven.cli.demo import run_demo

    try:
        run_demo(directory)
    except AqvenError as err:
        fail(err, 1)


@app.command()
def studio(
    page: Annotated[str | None, typer.Argument(help="a page to open: research, runs, findings, series/ID ...")] = None,
    no_open: Annotated[bool, typer.Option("--no-open", help="print the address without opening a browser")] = False,
    root: RootOpt = None,
) -> None:
    """Open Studio, the web UI, starting the project server when none runs."""
    from aqven.cli.studio_cmd import open_studio

    try:
        open_studio(project_root(root), page=page, open_browser=not no_open)
    except AqvenError as err:
        fail(err)


@app.command()
def mcp(root: RootOpt = None) -> None:
    """Serve the project's MCP tools over stdio (register `aqven mcp` with your MCP client)."""
    from aqven.cli.mcp_cmd import run_mcp

    try:
        run_mcp(project_root(root))
    except AqvenError as err:
        fail(err)


def main() -> None:
    from aqven.cli.background import say_still_running

    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    finally:
        say_still_running()  # a server this command started keeps running: say so once, and how to stop it
