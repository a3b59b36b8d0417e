"""Hashes of what a series runs on: one manifest for the series, and the same hash recorded by every attempt.

`series_manifest` covers only what the series runs: aqven.yaml, the flows its variants compile to (their
folders, and those of the flows they call), the agents their llm nodes and judges use (and, simulated, those
agents' simulator code), the experiment's folder, the code of its check functions, and the content of the
series' own cases (one entry, so no held-out case is named). Every attempt records the manifest's hash as the
workspace it ran in had it (`attempt_inputs_hash`): a series whose attempts do not all share one hash ran on
inputs that changed, even when the edit was put back before it ended.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from aqven.engine.compile import compile_flow
from aqven.errors import AqvenError
from aqven.project.paths import rel, within
from aqven.research.experiments.files import function_file
from aqven.store.records import RunRequest

if TYPE_CHECKING:
    from aqven.engine.compiled import CompiledFlow
    from aqven.research.experiments.workspace import Workspace
    from aqven.store.series_records import SeriesPlan

SKIP_PARTS = {"__pycache__", ".aqven", "findings"}
NOTES = {"experiment.md", "README.md"}  # notes for people: editing them changes nothing a series runs on


def _files(root: Path, base: Path) -> list[Path]:
    """The files under `base` a series reads; a link that leaves the project is never read (the loader refuses
    it, so nothing that runs reads it either)."""
    if base.is_file():
        return [base] if within(root, base) else []
    if not base.is_dir():
        return []
    return sorted(
        p
        for p in base.rglob("*")
        if p.is_file()
        and not (SKIP_PARTS & set(p.parts))
        and p.suffix != ".pyc"
        and p.name not in NOTES
        and within(root, p)
    )


def manifest_hash(manifest: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _code_base(root: Path, file: Path) -> Path:
    """A code file and the modules next to it (a folder of its own), or the file alone at the project root."""
    folder = file.parent
    if folder.resolve() != root.resolve() and root.resolve() in folder.resolve().parents:
        return folder
    return file


def _agent_file(root: Path, agent_id: str) -> list[Path]:
    return [p for p in (root / "agents" / f"{agent_id}.yaml", root / "agents" / f"{agent_id}.yml") if p.is_file()]


def _flow_bases(flow: CompiledFlow, agents: set[str], bases: list[Path]) -> None:
    bases.append(flow.folder)
    for node in flow.walk():
        if node.agent is not None and node.agent.id:
            agents.add(node.agent.id)
        if node.code_file is not None:
            bases.append(node.code_file.parent if node.code_file.parent != flow.folder else node.code_file)
        if node.called is not None:
            _flow_bases(node.called, agents, bases)


def cases_digest(ws: Workspace, plan: SeriesPlan) -> str:
    """sha256 of the content of the series' cases (input, context, node_outputs, expected output, tags)."""
    h = hashlib.sha256()
    for name in plan.cases:
        h.update(ws.case_bytes(plan.dataset_id, name))
    return h.hexdigest()


def series_manifest(
    ws: Workspace,
    *,
    flow_id: str,
    variants: list[str],
    experiment_id: str | None,
    simulated: bool,
    plan: SeriesPlan | None = None,
) -> dict[str, str]:
    """{relative path: sha256} of the files a series of this subject and these variants runs, and, given its
    plan, `datasets/<id>#cases` for the content of its cases."""
    project = ws.project
    root = project.root
    bases: list[Path] = [root / "aqven.yaml"]
    agents: set[str] = set()
    out: dict[str, str] = {}
    for variant in variants:
        request = RunRequest(
            flow_id=flow_id, experiment_id=experiment_id, variant_id=variant if experiment_id else None
        )
        try:
            flow = compile_flow(project, flow_id, ws.patch_for(request))
        except AqvenError as exc:  # a flow broken mid-series: its error is part of what the attempt ran on
            out[f"<compile {variant}>"] = hashlib.sha256(f"{exc.code}:{exc.message}".encode()).hexdigest()
            continue
        _flow_bases(flow, agents, bases)
    if experiment_id is not None:
        exp = ws.experiments.get(experiment_id)
        bases.append(root / "experiments" / experiment_id)
        if exp is not None:
            for check in exp.spec.checks:
                if check.judge is not None:
                    agents.add(check.judge.agent)
                if check.function:
                    try:
                        path, _name = function_file(project, exp, check.function)
                    except AqvenError:
                        continue
                    bases.append(_code_base(root, path))
    for agent_id in sorted(agents):
        bases.extend(_agent_file(root, agent_id))
        agent = project.agents.get(agent_id)
        if simulated and agent is not None and agent.simulator and ".py:" in agent.simulator:
            bases.append(_code_base(root, root / agent.simulator.rpartition(":")[0]))
    for base in dict.fromkeys(bases):
        for path in _files(root, base):
            out[rel(root, path)] = _sha(path)
    if plan is not None:
        out[f"datasets/{plan.dataset_id}{CASES_KEY}"] = cases_digest(ws, plan)
    return dict(sorted(out.items()))


CASES_KEY = "#cases"


def without_cases(manifest: dict[str, str]) -> dict[str, str]:
    """A manifest without its cases' entry: what two series of one subject on different cases share."""
    return {k: v for k, v in manifest.items() if not k.endswith(CASES_KEY)}


def plan_manifest(ws: Workspace, plan: SeriesPlan, experiment_id: str | None, *, simulated: bool) -> dict[str, str]:
    """The manifest of a series with this plan, its cases included."""
    return series_manifest(
        ws, flow_id=plan.flow_id, variants=plan.variants, experiment_id=experiment_id, simulated=simulated, plan=plan
    )


def attempt_inputs_hash(
    ws: Workspace, series_id: str, plan: SeriesPlan, experiment_id: str | None, *, simulated: bool
) -> str:
    """The hash of the series' inputs as this loaded workspace has them, computed once per workspace: the
    workspace is re-read when a file changes, so each attempt records the inputs it actually ran on."""
    cache = ws.inputs_hashes
    found = cache.get(series_id)
    if found is None:
        found = cache[series_id] = manifest_hash(plan_manifest(ws, plan, experiment_id, simulated=simulated))
    return found
