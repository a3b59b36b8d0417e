"""Whether a finding verifies: its content hash, its seal, and, on the machine that holds its series, its verdict
recomputed from the stored attempts.

A forger who edits a finding can recompute its plain content hash. The seal is an HMAC keyed by the secret in
`.aqven/finding.key`, which stays on the machine that ran the series (not in git), and the attempt records the
verdict rests on are in that machine's database: there, every number of the finding is recomputed. Elsewhere (a
clone) only the content hash can be checked, and `aqven check` says so.

The key can be read by whoever can read `.aqven/`, so a seal alone proves nothing: a finding *verifies* only when
its verdict was recomputed from its series stored here (`Verification.verifies`, the one rule FINDINGS.md's
shelves, a judge's `validated_by` and every surface's `verifies` read). A finding sealed with this machine's key
whose series is not in this machine's database is `E_FINDING_SERIES_MISSING` (made up: whoever read the key sealed
it). Where there is no database or no key here (a clone, or a colleague's machine), it is `W_FINDING_UNVERIFIED`
and does not block a series; FINDINGS.md lists both only as "could not be verified", never as a verdict.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import yaml

from aqven import ENGINE_VERSION
from aqven.errors import NotFoundError
from aqven.people import load, reverify
from aqven.research.findings.records import SEALED_FROM, finding_key, is_intact, read_findings, seal_matches
from aqven.research.stats.series_verdict import compute_verdict, sequence_view
from aqven.store.db import Database
from aqven.store.location import store_of
from aqven.store.open import open_database
from aqven.store.series import SeriesStore
from aqven.store.series_records import ENDED, AttemptRow
from aqven.store.series_tally import read_tally

#: The fields of an attempt record a finding's digest covers (everything its verdict and spend rest on).
DIGEST_FIELDS = (
    "idx",
    "case_name",
    "variant_id",
    "rep",
    "seed",
    "status",
    "outcome",
    "value",
    "error_code",
    "cost_usd",
    "unpriced",
    "reruns",
    "inputs_hash",
)
VERDICT_FIELDS = ("verdict", "text", "reason")


def attempts_digest(attempts: list[AttemptRow]) -> str:
    """sha256 of the series' attempt records (in index order), as a finding carries it."""
    h = hashlib.sha256()
    for a in sorted(attempts, key=lambda x: x.idx):
        record = [getattr(a, f) for f in DIGEST_FIELDS]
        h.update(json.dumps(record, separators=(",", ":"), default=str).encode())
        h.update(b"\n")
    return "sha256:" + h.hexdigest()


def one_inputs_hash(attempts: list[AttemptRow]) -> bool:
    """True when every attempt that recorded its inputs ran on the same ones."""
    return len({a.inputs_hash for a in attempts if a.inputs_hash is not None}) <= 1


TAMPERED = "E_FINDING_TAMPERED"
SERIES_MISSING = "E_FINDING_SERIES_MISSING"

#: Where a finding stands: it verifies (FINDINGS.md's shelves), it could not be verified here (FINDINGS.md lists it
#: apart, never as a verdict), or it does not verify (left out).
Standing = Literal["verified", "unverified", "refused"]


@dataclass
class Verification:
    ok: bool  # nothing this machine can check differs
    problem: str | None = None  # why it does not verify
    unchecked: str | None = None  # what could not be checked here (a clone: no key, no series)
    code: str = TAMPERED  # the diagnostic of a problem
    recomputed: bool = False  # its verdict was checked against its series stored in this machine's database

    @property
    def verifies(self) -> bool:
        """The one rule: nothing differs and its verdict was recomputed here. A finding that only could not be
        refuted (a clone, a made-up series) counts for nothing: no shelf of FINDINGS.md, no validated judge."""
        return self.ok and self.recomputed

    @property
    def standing(self) -> Standing:
        if self.verifies:
            return "verified"
        if self.ok or self.code == SERIES_MISSING:
            return "unverified"
        return "refused"


def _plain(value: Any) -> Any:
    """A value as it reads back from a finding file (YAML, then JSON-comparable)."""
    return json.loads(json.dumps(yaml.safe_load(yaml.safe_dump(value, allow_unicode=True)), default=str))


class Verifier:
    """Verifies findings of one project; opens its database (when there is one) once for all of them."""

    def __init__(self, root: Path, db: Database | None = None) -> None:
        self.root = root
        self.key = finding_key(root)
        self._db = db
        self._own = False

    def _store(self) -> SeriesStore | None:
        if self._db is None:
            location = store_of(self.root)
            if location.path is not None and not location.path.is_file():
                return None  # no SQLite file yet: nothing ran here
            self._db = open_database(location)
            self._own = True
        return SeriesStore(self._db)

    def close(self) -> None:
        if self._own and self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def verify(self, path: Path, data: dict[str, Any] | None) -> Verification:
        if not isinstance(data, dict) or not is_intact(data):
            return Verification(False, "its integrity hash does not match its content (it was edited)")
        version = int(data.get("finding_version") or 1)
        unchecked: list[str] = []
        if self.key is not None:
            if "seal" in data or version >= SEALED_FROM:
                if not seal_matches(data, self.key):
                    return Verification(False, "its seal does not match (it was edited, or written elsewhere)")
            else:
                unchecked.append("it was written before findings were sealed")
        elif version >= SEALED_FROM:
            unchecked.append("the seal's key is not on this machine (.aqven/finding.key)")
        recomputed = self._recompute(data, version)
        if recomputed.problem is not None:
            return recomputed
        if recomputed.unchecked:
            unchecked.append(recomputed.unchecked)
        approved = self._approvals(data)
        if approved.problem is not None:
            return approved
        if approved.unchecked:
            unchecked.append(approved.unchecked)
        return Verification(True, None, "; ".join(unchecked) or None, recomputed=recomputed.recomputed)

    def _approvals(self, data: dict[str, Any]) -> Verification:
        """The passkey approvals a finding names verify again against the passkeys registered here; one whose
        passkey is not registered on this machine (a colleague's) is left unchecked."""
        passkeys = load(self.root).passkeys
        known = {p.id for p in passkeys}
        elsewhere = 0
        for approval in data.get("approvals") or []:
            proof = approval.get("proof") if isinstance(approval, dict) else None
            if not isinstance(proof, dict):
                continue
            if proof.get("credential_id") not in known:
                elsewhere += 1
                continue
            why = reverify(proof, passkeys)
            if why is not None:
                return Verification(False, f"a passkey approval it names does not verify: {why}")
        note = f"{elsewhere} passkey approval(s) made with a passkey not registered here" if elsewhere else None
        return Verification(True, None, note)

    def _recompute(self, data: dict[str, Any], version: int) -> Verification:
        store = self._store()
        sid = data.get("series_id")
        if store is None:  # a clone: nothing here to recompute from
            return Verification(
                True,
                None,
                "its series is not in this machine's database (there is none: .aqven/aqven.sqlite), so its verdict "
                "was not recomputed",
            )
        try:
            if not isinstance(sid, str):
                raise NotFoundError(f"no series {sid!r}")
            s = store.get(sid)
        except NotFoundError:
            if self.key is None:  # no seal of this machine's to check: written elsewhere, like a clone's
                return Verification(
                    True,
                    None,
                    f"its series {sid} is not in this machine's database and this machine has no finding key, so it "
                    "was written elsewhere and its verdict was not recomputed",
                )
            return Verification(  # sealed with this machine's key, yet its series never ran here: made up
                False,
                f"its series {sid} is not in this machine's database: it never ran here, so nothing it says can be "
                "recomputed",
                code=SERIES_MISSING,
            )
        if s.experiment_id != data.get("experiment_id") or s.on != "holdout" or s.kind != "experiment":
            return Verification(False, f"series {sid} in the database is not a held-out series of this experiment")
        attempts = store.attempts(sid)
        evidence = data.get("evidence") or {}
        if (version >= SEALED_FROM or evidence) and evidence.get("attempts_digest") != attempts_digest(attempts):
            return Verification(False, "the digest of its attempt records differs from the series' stored attempts")
        scope = data.get("scope") or {}
        if scope.get("engine_version") == ENGINE_VERSION:
            ended = s if s.status in ENDED else s.model_copy(update={"status": "done"})
            tally = read_tally(store.db, sid)
            verdict = compute_verdict(
                ended,
                tally,
                provisional=False,
                inputs_changed=not one_inputs_hash(attempts),
                sequence=sequence_view(store, ended, tally) if ended.plan.stop_early else None,
            )
            source = f"the verdict recomputed from the series' {len(attempts)} stored attempts"
        else:  # another engine may decide otherwise: compare with the verdict it stored when the series ended
            verdict = s.verdict
            source = "the verdict stored with the series"
        if verdict is None:
            return Verification(False, f"{source} is missing")
        found = data.get("verdict") or {}
        for key in VERDICT_FIELDS:
            if _plain(verdict.get(key)) != _plain(found.get(key)):
                return Verification(False, f"its verdict.{key} differs from {source}")
        for key in ("cells", "comparisons"):
            if _plain(verdict.get(key, [])) != _plain(data.get(key, [])):
                return Verification(False, f"its {key} differ from {source}")
        return Verification(True, recomputed=True)


def verified_findings(
    root: Path, db: Database | None = None
) -> Iterator[tuple[Path, dict[str, Any] | None, Verification]]:
    """Every finding file of the project with what verifying it found (one database for all of them)."""
    with Verifier(root, db) as verifier:
        for path, data in read_findings(root):
            yield path, data, verifier.verify(path, data)
