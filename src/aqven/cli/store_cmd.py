"""`aqven store`: where the project's record lives, and a copy of it to another store (SQLite ↔ PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aqven.cli.render import console
from aqven.errors import AqvenError

store_app = typer.Typer(
    no_args_is_help=True,
    help="The project's record: where it is (show), and a whole copy of it to another store (copy).",
)
RootOpt = Annotated[Path | None, typer.Option("--root", help="the project folder (default: found from here)")]


@store_app.command("show")
def show(root: RootOpt = None) -> None:
    """Print the store this project uses (its password never shown) and where that was set."""
    import os

    from aqven.cli.project_args import fail, project_root
    from aqven.store.location import STORE_ENV, store_of

    where = project_root(root)
    try:
        location = store_of(where)
    except AqvenError as err:
        fail(err)
    source = STORE_ENV if os.environ.get(STORE_ENV, "").strip() else ".aqven/local.yaml (store:)"
    if location.backend == "sqlite" and source != STORE_ENV:
        source = "the default" if location.path == where / ".aqven" / "aqven.sqlite" else source
    console.print(f"{location.backend}  {location.shown}  (from {source})", markup=False)


@store_app.command("copy")
def copy(
    to: Annotated[str, typer.Option("--to", help="postgresql://USER@HOST:PORT/DATABASE, or sqlite:PATH (empty)")],
    root: RootOpt = None,
) -> None:
    """Copy the project's whole record (series, attempts, runs, events, approvals, tallies) into an empty store;
    print each table's rows and digest on both sides, check that every finding verifies on the copy and that
    FINDINGS.md regenerates from it byte for byte (exit 0 all the same, 1 a difference, 2 an error)."""
    from aqven.cli.project_args import fail, project_root
    from aqven.research.findings.records import read_findings
    from aqven.research.findings.verify import Verifier
    from aqven.research.findings.writing import render_findings_md
    from aqven.server.lifecycle import read_server
    from aqven.store.copy import copy_store
    from aqven.store.location import parse_store, store_of
    from aqven.store.open import open_database

    where = project_root(root)
    try:
        source_location = store_of(where)
        target_location = parse_store(to, root=where, source="--to")
        if target_location == source_location:
            raise AqvenError(
                f"--to names the store this project uses already ({source_location.shown})",
                code="STORE_INVALID",
                hint="copy to another database or file",
            )
        source = open_database(source_location)
        target = open_database(target_location)
    except AqvenError as err:
        fail(err)
    server = read_server(where)
    if server is not None and server.get("store") in (None, source_location.shown):
        console.print("a server writes to this store: what it writes after this moment is not in the copy")
    try:
        console.print(f"copying {source.location} -> {target.location}", markup=False)
        tables = copy_store(source, target)
    except AqvenError as err:
        fail(err)
    same = True
    for t in tables:
        mark = "same" if t.same else "DIFFERENT"
        console.print(f"  {t.table:<14} {t.rows:>9} rows  {t.target_digest[:23]}  {mark}", markup=False)
        same = same and t.same
    findings = read_findings(where)
    with Verifier(where, source) as before, Verifier(where, target) as after:
        standing_before = {p: before.verify(p, d).standing for p, d in findings if d}
        standing_after = {p: after.verify(p, d).standing for p, d in findings if d}
        md_before = render_findings_md(where, findings, verified=lambda p, d: standing_before[p])
        md_after = render_findings_md(where, findings, verified=lambda p, d: standing_after[p])
    verified = sum(1 for s in standing_after.values() if s == "verified")
    lost = [p.name for p, s in standing_before.items() if s == "verified" and standing_after[p] != "verified"]
    console.print(f"findings: {verified} of {len(standing_after)} verify on the copy", markup=False)
    for name in lost:
        console.print(f"  {name} verifies on the source and not on the copy", markup=False)
    console.print(f"FINDINGS.md: {'byte-identical' if md_before == md_after else 'DIFFERENT'} from the copy")
    source.close()
    target.close()
    if not same or lost or md_before != md_after:
        raise typer.Exit(1)
    password = " (a password goes in ~/.pgpass)" if target_location.backend == "postgresql" else ""
    console.print(
        f"to use the copy: store: {target_location.setting} in .aqven/local.yaml{password}, or AQVEN_STORE;"
        " then restart the server (aqven server stop)",
        markup=False,
    )
