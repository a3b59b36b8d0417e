"""Hashes of what a series runs on: one manifest for the series, and the same hash recorded by every attempt.

`series_manifest` covers only what the series runs: aqven.yaml, the flows its variants compile to (their
folders, and those of the flows they call), the agents their llm nodes and judges use (and, simulated, those
agents' simulator code), the experiment's folder, the code of its check functions, and the content of the
series' own cases (one entry, so no held-out case is named). Every attempt records the manifest's hash as the
workspace it ran in had it (`attempt_inputs_hash`): a series whose attempts do not all share one hash ran on
inputs that changed, even when the edit was put back before it ended.

Code is read where it runs, not with the workspace: a simulator, a code node or a check function is loaded from its
file whenever that file's time or size changed (`project/pycode.load_module`), while the workspace is read again
only when a watched file changes (simulators live outside them, and the watch looks once a second). So the code
files of a series (`live`) are hashed as they are at each attempt's start and end, by the same key the loader
reloads on: an edit of a simulator that changes what runs changes the hash of every attempt that ran it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aqven.engine.compile import compile_flow
from aqven.errors import AqvenError
from aqven.project.paths import rel, within
from aqven.project.pycode import parse_ref
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


def _flow_bases(flow: CompiledFlow, agents: set[str], bases: list[Path], live: list[Path]) -> None:
    bases.append(flow.folder)
    for node in flow.walk():
        if node.agent is not None and node.agent.id:
            agents.add(node.agent.id)
        if node.code_file is not None:
            live.append(node.code_file.parent if node.code_file.parent != flow.folder else node.code_file)
        if node.called is not None:
            _flow_bases(node.called, agents, bases, live)


_seen_lock = threading.Lock()
_seen: dict[Path, tuple[tuple[int, int], str]] = {}  # a code file's digest, by the key the loader reloads on


def _live_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _live_sha(path: Path, key: tuple[int, int] | None) -> str:
    """sha256 of a code file as the loader would load it now (read again only when its time or size changed)."""
    if key is None:
        return "missing"
    with _seen_lock:
        found = _seen.get(path)
    if found is not None and found[0] == key:
        return found[1]
    try:
        digest = _sha(path)
    except OSError:
        return "missing"
    with _seen_lock:
        _seen[path] = (key, digest)
    return digest


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
    manifest = _manifest(ws, flow_id, variants, experiment_id, simulated, plan)
    return manifest.now()


@dataclass(frozen=True)
class _Manifest:
    """A series' manifest as a loaded workspace has it: the files read with the workspace (`fixed`, hashed once)
    and the code files read where they run (`live`, hashed by `now`)."""

    root: Path
    fixed: dict[str, str]
    live: tuple[Path, ...]

    def keys(self) -> tuple[tuple[int, int] | None, ...]:
        return tuple(_live_key(p) for p in self.live)

    def now(self, keys: tuple[tuple[int, int] | None, ...] | None = None) -> dict[str, str]:
        keys = self.keys() if keys is None else keys
        out = dict(self.fixed)
        for path, key in zip(self.live, keys, strict=True):
            out[rel(self.root, path)] = _live_sha(path, key)
        return dict(sorted(out.items()))


def _manifest(
    ws: Workspace,
    flow_id: str,
    variants: list[str],
    experiment_id: str | None,
    simulated: bool,
    plan: SeriesPlan | None,
) -> _Manifest:
    project = ws.project
    root = project.root
    bases: list[Path] = [root / "aqven.yaml"]
    live: list[Path] = []  # code: its files are hashed as they are when an attempt runs
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
        _flow_bases(flow, agents, bases, live)
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
                    live.append(_code_base(root, path))
    for agent_id in sorted(agents):
        bases.extend(_agent_file(root, agent_id))
        agent = project.agents.get(agent_id)
        if simulated and agent is not None and agent.simulator:
            # Only a simulated series runs simulators: a live series' hash never depends on their files.
            code = _simulator_file(root, agent.simulator)
            if code is not None:
                live.append(_code_base(root, code))
    live_files = {p: None for base in dict.fromkeys(live) for p in _files(root, base)}
    for base in dict.fromkeys(bases):
        for path in _files(root, base):
            if path not in live_files:
                out[rel(root, path)] = _sha(path)
    if plan is not None:
        out[f"datasets/{plan.dataset_id}{CASES_KEY}"] = cases_digest(ws, plan)
    return _Manifest(root, out, tuple(live_files))


def _simulator_file(root: Path, ref: str) -> Path | None:
    """The file an agent's simulator is loaded from (`file.py:fn` or `pkg.module:fn`, as models/simulate.py reads
    it), or None when the reference names none (the attempt fails on it, and that is what it ran on)."""
    try:
        target, _name = parse_ref(ref, module_form=True)
    except ValueError:
        return None
    return root / target


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
    """The hash of the series' inputs as they are now: the files the workspace read, as this loaded workspace has
    them (it is re-read when they change), and the code files as they are on disk at this call (the loader
    reloads them on their own). The manifest is built once per workspace; the hash again only when a code file's
    time or size changed."""
    cache = ws.inputs_hashes
    found = cache.get(series_id)
    if found is None:
        manifest = _manifest(ws, plan.flow_id, plan.variants, experiment_id, simulated, plan)
        found = cache[series_id] = (manifest, None, "")
    manifest, keys, digest = found
    now = manifest.keys()
    if now != keys:
        digest = manifest_hash(manifest.now(now))
        cache[series_id] = (manifest, now, digest)
    return digest
