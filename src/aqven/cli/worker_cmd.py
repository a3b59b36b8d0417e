"""`aqven worker` (run a series' attempts on this machine, for the server of a shared store) and `aqven workers`
(list them). Both act on the store directly, not through a project server: the server answers on its own machine's
loopback only, and a worker is on another machine."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Annotated

import typer

from aqven.cli.project_args import fail, project_root
from aqven.cli.render import console
from aqven.errors import AqvenError

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="the project's shared store, postgresql://USER@HOST:PORT/DATABASE (default: store: in .aqven/local.yaml,"
        " AQVEN_STORE)",
    ),
]
ProjectOpt = Annotated[Path | None, typer.Option("--project", help="the project folder (default: found from here)")]


def _dsn(store: str | None, root: Path) -> str:
    from aqven.errors import CLUSTER_NEEDS_POSTGRES
    from aqven.store.location import parse_store, store_of

    location = parse_store(store, root=root, source="--store") if store else store_of(root)
    if location.dsn is None:
        raise AqvenError(
            f"workers need the project's shared PostgreSQL store; {location.shown} is SQLite",
            code=CLUSTER_NEEDS_POSTGRES,
            hint="pass --store postgresql://USER@HOST:PORT/DATABASE (docs/how-to/run-on-several-machines.md)",
        )
    return location.dsn


def worker(
    store: StoreOpt = None,
    project: ProjectOpt = None,
    slots: Annotated[
        int | None, typer.Option("--slots", min=1, max=512, help="attempts side by side here (default: concurrency)")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="this worker's name (default: HOST-PID)")] = None,
) -> None:
    """Run attempts of the project's series on this machine, handed out by its server (`aqven serve --cluster`)
    through the shared PostgreSQL store; until interrupted. It refuses (WORKER_INPUTS_MISMATCH) to run a series
    planned on other files than this folder's."""
    from aqven.research.cluster.node import CHILD_ENV
    from aqven.research.cluster.node import main as run_worker

    root = project_root(project)
    try:
        dsn = _dsn(store, root)
    except AqvenError as err:
        fail(err)
    if not os.environ.get(CHILD_ENV):
        raise typer.Exit(_supervise())
    try:
        run_worker(root, dsn, name=name, slots=slots)
    except AqvenError as err:
        from aqven.errors import STORE_UNAVAILABLE
        from aqven.research.cluster.node import EXIT_CUT_OFF

        if err.code == STORE_UNAVAILABLE and os.environ.get(RESTARTED_ENV):
            fail(err, EXIT_CUT_OFF)  # started again after the store went out of reach, still out: try again
        fail(err)


RESTARTED_ENV = "AQVEN_WORKER_RESTARTED"
"""Set in a worker process the supervisor started again: one that still cannot reach the store exits as cut off."""


def _supervise() -> int:
    """Run the worker in a child process, and start it again (a new executor) when it stopped itself because the
    store was out of reach or the server declared it lost, and again while the store stays out of reach (a cable
    pulled for longer than the fence: tests/research/cluster/test_cluster_hosts.py); not when it refused the
    project's files, nor when it was interrupted, nor when the store could not be reached at the first start (a wrong
    --store). The child dies with this process (node.py binds it)."""
    import signal
    import subprocess
    import sys
    import time

    from aqven.research.cluster.node import CHILD_ENV, EXIT_CUT_OFF, EXIT_LOST

    env = {**os.environ, CHILD_ENV: str(os.getpid())}
    while True:
        child = subprocess.Popen([sys.executable, "-m", "aqven", *sys.argv[1:]], env=env)
        try:
            code = child.wait()
        except KeyboardInterrupt:  # the child has its own SIGINT (same terminal): it stops, and so do we
            with contextlib.suppress(Exception):
                child.send_signal(signal.SIGINT)
                child.wait(30)
            return 130
        if code not in (EXIT_CUT_OFF, EXIT_LOST):
            return code
        console.print(f"aqven worker: stopped itself (exit {code}); starting again in 2 s", markup=False)
        env[RESTARTED_ENV] = "1"  # the store was reached before: an unreachable one is waited for, not a failure
        time.sleep(2.0)


def workers(
    store: StoreOpt = None,
    project: ProjectOpt = None,
    every: Annotated[bool, typer.Option("--all", help="also the workers that ended (lost, stopped, refused)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON list")] = False,
) -> None:
    """List the workers of the project's shared store: host, slots, attempts running, last heartbeat, state."""
    from aqven.store.location import StoreLocation
    from aqven.store.open import open_database
    from aqven.store.workers import WorkerStore

    root = project_root(project)
    try:
        db = open_database(StoreLocation("postgresql", dsn=_dsn(store, root)))
        rows = WorkerStore(db).listing(ended=every)
        db.close()
    except AqvenError as err:
        fail(err)
    if as_json:
        print(json.dumps([r.to_json() for r in rows]))
        return
    if not rows:
        console.print("no workers" + ("" if every else " live (--all lists the ended ones)"))
        return
    console.print(f"{'name':<24} {'host':<20} {'state':<8} {'slots':>5} {'running':>7} {'ran':>6}  last heartbeat")
    for r in rows:
        line = f"{r.name:<24} {r.host:<20} {r.state:<8} {r.slots:>5} {r.running:>7} {r.ran:>6}  {r.beat_at}"
        console.print(line, markup=False)
        if r.error_code:
            console.print(f"  {r.error_code}: {r.error_message}", markup=False)
