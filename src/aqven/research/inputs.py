"""Hashes of everything a series runs on: if they differ at the end, the series measured something else."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from aqven.project.loader import Project
from aqven.project.paths import rel, within

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


def inputs_manifest(project: Project, experiment_id: str | None, dataset_id: str, *, simulated: bool) -> dict[str, str]:
    """{relative path: sha256} of the project files a series of this experiment reads."""
    root = project.root
    bases = [
        root / "aqven.yaml",
        root / "agents",
        root / "flows",
        root / "checks",
        root / "datasets" / f"{dataset_id}.yaml",
        root / "datasets" / f"{dataset_id}.yml",
    ]
    if experiment_id is not None:
        bases.append(root / "experiments" / experiment_id)
    if simulated:
        # Simulators answer in the models' place: their code (and the modules next to it) is an input.
        for agent in project.agents.values():
            if agent.simulator and ".py:" in agent.simulator:
                folder = (root / agent.simulator.rpartition(":")[0]).parent
                if folder.resolve() != root.resolve() and root.resolve() in folder.resolve().parents:
                    bases.append(folder)
                else:
                    bases.append(root / agent.simulator.rpartition(":")[0])
    out: dict[str, str] = {}
    for base in dict.fromkeys(bases):
        for path in _files(root, base):
            out[rel(root, path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(sorted(out.items()))


def manifest_hash(manifest: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
