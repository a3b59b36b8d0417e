"""`aqven check` of what people approved: every passkey proof on record verifies again (E_APPROVAL_UNVERIFIED).

A passkey's approval keeps its assertion and the act it was bound to (`aqven.people.passkeys`). Here each one in
the project's store (series approvals, human nodes' answers) and in each finding file is verified again with
the public keys registered in the person folder: an edited amount, series or signature, or a proof from a key
that was never registered, is an error.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from aqven.errors import AqvenError
from aqven.people import load, reverify
from aqven.project.diagnostics import Diagnostic
from aqven.project.paths import rel
from aqven.research.findings.records import read_findings
from aqven.store.location import store_of
from aqven.store.open import open_database

CODE = "E_APPROVAL_UNVERIFIED"
HINT = "a person's passkey approval was edited, or made with a key not registered for this project; do not trust it"


_PROOFS = (
    "SELECT 'series ' || series_id || ' ' || action, proof FROM approvals WHERE proof IS NOT NULL"
    " UNION ALL SELECT 'run ' || run_id || ' node ' || node_id, proof FROM human_answers WHERE proof IS NOT NULL"
)


def _stored_rows(root: Path) -> list[Any]:
    """The proofs' rows in the project's store: its SQLite file read without a writer (none made where there is
    none), or its PostgreSQL database (STORE_UNAVAILABLE where it cannot be reached)."""
    try:
        location = store_of(root)
    except AqvenError:  # unreadable local settings: a diagnostic of their own (project/local.py)
        return []
    if location.backend == "sqlite":
        assert location.path is not None
        if not location.path.is_file():
            return []
        conn = sqlite3.connect(f"file:{location.path}?mode=ro", uri=True)
        try:
            return conn.execute(_PROOFS).fetchall()
        except sqlite3.Error:  # an older schema without proofs: nothing to verify
            return []
        finally:
            conn.close()
    database = open_database(location)
    try:
        with database.reading() as reader:
            return list(reader.tuples().execute(_PROOFS).fetchall())
    finally:
        database.close()


def _stored(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """(what, proof) of every passkey proof in the store."""
    out: list[tuple[str, dict[str, Any]]] = []
    for what, proof in _stored_rows(root):
        try:
            out.append((str(what), json.loads(proof)))
        except ValueError:
            out.append((str(what), {}))
    return out


def check_approvals(root: Path) -> list[Diagnostic]:
    passkeys = load(root).passkeys
    out: list[Diagnostic] = []
    for what, proof in _stored(root):
        why = reverify(proof, passkeys)
        if why is not None:
            out.append(Diagnostic.of(CODE, f"the passkey approval of {what} does not verify: {why}", hint=HINT))
    for path, data in read_findings(root):
        for approval in (data or {}).get("approvals") or []:
            named = approval.get("proof") if isinstance(approval, dict) else None
            if isinstance(named, dict):
                why = reverify(named, passkeys)
                if why is not None:
                    out.append(
                        Diagnostic.of(
                            CODE,
                            f"a passkey approval this finding names does not verify: {why}",
                            file=rel(root, path),
                            hint=HINT,
                        )
                    )
    return out
