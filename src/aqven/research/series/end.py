"""The end of a series: its status, its final verdict (`aqven.research.stats.series_verdict`), and its finding."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from decimal import Decimal
from typing import Any

from aqven import ENGINE_VERSION
from aqven.research.experiments.inputs import manifest_hash, plan_manifest
from aqven.research.experiments.loading import human_labels
from aqven.research.experiments.schema import ExperimentSource
from aqven.research.experiments.workspace import Workspace
from aqven.research.findings.records import FINDING_VERSION, split_hash
from aqven.research.findings.verify import attempts_digest
from aqven.research.findings.writing import write_finding
from aqven.research.holdout import series_error
from aqven.research.series.early import early_stop_record, sequence_view
from aqven.research.series.reads import held_out_reads
from aqven.research.stats.judge_correction import agreement_record
from aqven.research.stats.questions import QUESTION_KINDS
from aqven.research.stats.series_verdict import case_cells, compute_verdict
from aqven.store.approvals import approvals_of
from aqven.store.runs import RunStore, now_iso
from aqven.store.series import SeriesStore
from aqven.store.series_records import AttemptRow, SeriesRow, active_now
from aqven.store.series_tally import COUNTED, SeriesTally, read_tally


def inputs_changed(ws: Workspace, s: SeriesRow, done: list[AttemptRow]) -> bool:
    """True when the series did not run on one set of inputs: an attempt recorded a hash other than the one the
    series started on (an edit while it ran, even one put back before its end), or what it runs differs now."""
    if any(a.inputs_hash is not None and a.inputs_hash != s.inputs_hash for a in done):
        return True
    return manifest_hash(plan_manifest(ws, s.plan, s.experiment_id, simulated=s.simulated)) != s.inputs_hash


def finalize(ws: Workspace, store: SeriesStore, runs: RunStore, series_id: str) -> SeriesRow:
    """Decide a series whose attempts are all finished (or that was cancelled), and write its finding."""
    s = store.get(series_id)
    attempts = store.attempts(series_id)
    done = [a for a in attempts if a.status == "done"]
    infra = [a for a in done if a.outcome == "infra"]
    fields: dict[str, Any] = {"ended_at": now_iso(), "active_since": None}
    if s.active_since is not None:
        fields["active_seconds"] = active_now(s)
    changed = inputs_changed(ws, s, done)
    status: str = "cancelled" if s.status == "cancelled" else "done"
    if status == "done" and done and len(infra) == len(done):
        first = min(infra, key=lambda a: a.idx)
        status = "failed"
        fields["error"] = series_error(
            code=first.error_code,
            message=first.error_message,
            run_id=first.run_id,
            case=first.case_name,
            side=first.side,
            variant=first.variant_id,
        )
    fields["status"] = status
    # Decide on the row as it will be stored, then write the finding, and only then store the end: a server
    # that dies in between leaves the series running, and the next start decides it again (the finding is
    # written once: a second write finds the file and keeps it).
    ended = s.model_copy(update={"status": status, "ended_at": fields["ended_at"], "error": fields.get("error")})
    tally = read_tally(store.db, series_id)
    sequence = sequence_view(store, ended, tally) if ended.plan.stop_early else None
    verdict = compute_verdict(ended, tally, provisional=False, inputs_changed=changed, sequence=sequence)
    if verdict is not None and status == "failed":
        verdict["verdict"] = "invalid"
    fields["verdict"] = verdict
    if (
        ended.kind == "experiment"
        and ended.on == "holdout"
        and status == "done"
        and verdict is not None
        and verdict["verdict"] != "invalid"
        and ended.experiment_id is not None
    ):
        data = finding_data(ws, ended, attempts, tally, runs, verdict, store)
        data["approvals"] = approvals_of(store.db, series_id)  # who raised the cap, through which channel
        data |= _agreement(ws, ws.experiment(ended.experiment_id), ended, tally) | _corrected(verdict)
        path = write_finding(ws.project.root, data)
        fields["finding"] = str(path.relative_to(ws.project.root))
    store.update(series_id, **fields)
    return store.get(series_id)


def finding_data(
    ws: Workspace,
    s: SeriesRow,
    attempts: list[AttemptRow],
    tally: SeriesTally,
    runs: RunStore,
    verdict: dict[str, Any],
    store: SeriesStore,
) -> dict[str, Any]:
    assert s.experiment_id is not None
    exp = ws.experiment(s.experiment_id)
    spent, unpriced = tally.total.spend, tally.unpriced_settled  # a decided series has no running attempt
    done = [a for a in attempts if a.status == "done"]
    infra = [a for a in done if a.outcome == "infra"]
    codes: dict[str, int] = defaultdict(int)
    for a in infra:
        codes[a.error_code or "unknown"] += 1
    models: dict[str, set[str]] = defaultdict(set)
    for a in done:
        if a.run_id is None:
            continue
        for event in runs.events(a.run_id):
            if event.kind == "model_response" and event.data.get("model_name"):
                models[a.variant_id].add(str(event.data["model_name"]))
    variants = [
        {"id": v.id, "nodes": dict(v.nodes), "models": sorted(models.get(v.id, set()))} for v in exp.spec.variants
    ]
    counted_cases = {a.case_name for a in done if a.outcome in COUNTED}
    reads = [r for r in held_out_reads(store, s.experiment_id, list(s.plan.cases)) if r["series_id"] != s.id]
    reads.append(
        {
            "series_id": s.id,
            "status": s.status,
            "cases": len({a.case_name for a in attempts if a.status == "done"}),
            "started_at": s.created_at,
            "ended_at": s.ended_at,
            "verdict": verdict["verdict"],
        }
    )
    return {
        "finding_version": FINDING_VERSION,
        "experiment_id": s.experiment_id,
        "series_id": s.id,
        "failure_mode": exp.spec.failure_mode,
        "description": exp.spec.description.strip(),
        "question": s.plan.question,
        "verdict": {k: verdict[k] for k in ("verdict", "text", "reason", "below_mde", "would_be")},
        "cells": verdict.get("cells", []),
        "comparisons": verdict.get("comparisons", []),
        "variants": variants,
        "varies": exp.spec.varies.model_dump() if exp.spec.varies else None,
        "scope": {
            "on": s.on,
            "dataset": s.plan.dataset_id,
            "tags": exp.spec.dataset.tags,
            "cases": len(counted_cases),
            # Which cases, without naming held-out cases: series on the same cases are counted together.
            "cases_hash": "sha256:" + hashlib.sha256("\n".join(s.plan.cases).encode()).hexdigest(),
            "repeats": s.plan.repeats,
            "attempts": len(done),
            "started_at": s.created_at,
            "ended_at": s.ended_at,
            "engine_version": ENGINE_VERSION,
            "simulated": s.simulated,
            "seed": s.sim_seed,
            "subject": {"flow": s.plan.flow_id, "from": s.plan.from_node, "to": s.plan.to_node},
            "stop_early": s.plan.stop_early,
            "early_stop": early_stop_record(s, len(done), len(attempts), Decimal(spent)),
        },
        "spend": {"usd": str(spent), "cap_usd": s.cap_usd, "unpriced_attempts": unpriced, "lower_bound": unpriced > 0},
        "infra_errors": {
            "count": len(infra),
            "share": round(len(infra) / len(done), 4) if done else 0.0,
            "codes": dict(codes),
        },
        "inputs": {"hash": s.inputs_hash, "files": s.inputs},
        # What the verdict rests on: a digest of every attempt record (recomputed by `aqven check` where the
        # series is stored), and the inputs every attempt ran on (one hash: the series' own).
        "evidence": {
            "attempts": len(attempts),
            "attempts_digest": attempts_digest(attempts),
            "inputs_hashes": sorted({a.inputs_hash for a in attempts if a.inputs_hash}),
        },
        # Every held-out read of this experiment so far (FINDINGS.md lists them all): re-reads are visible.
        "reads": reads,
        "judge": s.plan.judge,
        # The salt of the split the series ran on (hashed): `package:` edited later is E_SPLIT_CHANGED.
        "split": split_hash(ws.project.split_package),
    }


def _agreement(ws: Workspace, exp: ExperimentSource, s: SeriesRow, tally: SeriesTally) -> dict[str, Any]:
    """A judge-agreement experiment's finding records the judge's sensitivity and specificity (issue 10)."""
    agreement = exp.spec.judge_agreement
    if agreement is None or not QUESTION_KINDS[exp.spec.question.kind].agreement:
        return {}
    variant = exp.spec.question.variant or s.plan.variants[0]
    cells = case_cells(s, tally).get(variant, [])
    labels = human_labels(ws.project, exp.spec)
    record = agreement_record(variant, agreement.label, agreement.positive, cells, labels)
    return {"judge_agreement": record} if record is not None else {}


def _corrected(verdict: dict[str, Any]) -> dict[str, Any]:
    """A verdict corrected for its judge's errors records which finding corrected it, and each deciding interval
    as corrected, with the judge-decided interval and the sensitivity and specificity it stood on."""
    by = verdict.get("judge_corrected_by")
    if not by:
        return {}
    decided = [
        {k: c.get(k) for k in ("variant", "baseline", "estimate", "low", "high", "level")}
        | {"judge_correction": c.get("judge_correction")}
        for c in verdict.get("decided", [])
    ]
    return {"judge_corrected_by": by, "decided": decided}
