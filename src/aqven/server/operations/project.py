"""The project: its settings and cap, `aqven check`, flows, datasets and agents."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

from aqven.engine.compile import FlowCompiler
from aqven.engine.compiled import CompiledNode
from aqven.errors import NotFoundError
from aqven.people.records import record_path
from aqven.project.paths import state_dir
from aqven.project.watch import tree_fingerprint
from aqven.research.cluster.queue import cluster_wanted
from aqven.research.diagnostics.workspace import check_workspace
from aqven.research.launch.caps import confirm_project_cap, confirmed_project_cap
from aqven.server.operations.models import (
    AgentItem,
    CheckOut,
    DatasetItem,
    DatasetOut,
    FlowItem,
    FlowOut,
    ProjectOut,
    WorkerItem,
    WorkersOut,
)
from aqven.server.service import ProjectService
from aqven.store.approvals import Approver
from aqven.store.workers import WorkerStore


def project_info(svc: ProjectService) -> ProjectOut:
    project = svc.project()
    cap = confirmed_project_cap(
        project.root, project.config.research.spend_cap_usd if project.config.research else None
    )
    return ProjectOut(
        root=str(project.root),
        package=project.package,
        name=project.config.name,
        description=project.config.description,
        spend_cap_usd=str(cap.cap),
        spend_cap_source=cap.source,
        **cap.fields(),
        project_cap_confirmed_at=cap.confirmed_at,
        project_cap_confirmed_by=cap.channel,
        flows=sorted(project.flows),
        agents=sorted(project.agents),
        datasets=sorted(project.datasets),
    )


def confirm_cap(svc: ProjectService, cap_usd: str | int | float, who: Approver) -> ProjectOut:
    """A person confirms the project cap aqven.yaml (or the local override) asks for: new series get it."""
    project = svc.project()
    file_cap = project.config.research.spend_cap_usd if project.config.research else None
    confirm_project_cap(project.root, file_cap, cap_usd, who.channel, who.confirmed, who.person)
    return project_info(svc)


#: The last `aqven check` of each project, kept while nothing it reads changed (its files, .aqven/local.yaml and
#: the finding key, the person record, and the database's ended series and approvals): Studio's Overview asks for
#: it on every load, and a check reads and compiles every file (2.7 s on the showcase).
_CHECKED: dict[Path, tuple[Hashable, CheckOut]] = {}


def _check_key(svc: ProjectService) -> Hashable:
    state = state_dir(svc.root)
    files = tree_fingerprint(svc.root, also=(state / "local.yaml", state / "finding.key", record_path(svc.root)))
    row = svc.db.query_one(
        "SELECT (SELECT COUNT(*) FROM series WHERE ended_at IS NOT NULL) AS ended,"
        " (SELECT COUNT(*) FROM approvals) AS approvals,"
        " (SELECT COUNT(*) FROM human_answers WHERE proof IS NOT NULL) AS answers"
    )
    return files, tuple(row) if row is not None else ()


def check(svc: ProjectService) -> CheckOut:
    """`aqven check` of the project's files (reads and compiles them all: call it off the event loop); the last
    result while nothing it reads changed."""
    key = _check_key(svc)
    kept = _CHECKED.get(svc.root)
    if kept is not None and kept[0] == key:
        return kept[1]
    _ws, diagnostics = check_workspace(svc.root)
    errors = sum(d.severity == "error" for d in diagnostics)
    out = CheckOut(ok=errors == 0, errors=errors, warnings=len(diagnostics) - errors, diagnostics=diagnostics)
    _CHECKED[svc.root] = (key, out)
    return out


def _node_json(node: CompiledNode) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": node.id,
        "kind": node.kind,
        "deps": sorted(node.deps),
        "inputs": node.inputs,
        "output_schema": node.output_schema,
    }
    if node.agent is not None:
        out["agent"] = node.agent.id
        out["model"] = node.agent.model
    if node.prompt_file:
        out["prompt_file"] = node.prompt_file
    if node.code_file is not None:
        out["code"] = getattr(node.spec, "code", None)
    if node.called is not None:
        out["flow"] = node.called.id
    if node.children:
        out["children"] = [_node_json(c) for c in node.children]
        out["result"] = node.result
    return out


def flows(svc: ProjectService) -> list[FlowItem]:
    project = svc.project()
    return [
        FlowItem(id=fid, description=src.spec.description, nodes=[n.id for n in src.spec.nodes])
        for fid, src in sorted(project.flows.items())
    ]


def flow(svc: ProjectService, flow_id: str) -> FlowOut:
    """One flow compiled (compiles it: call it off the event loop)."""
    project = svc.project()
    source = project.flows.get(flow_id)
    if source is None:
        raise NotFoundError(f"no flow {flow_id!r}", code="FLOW_NOT_FOUND", hint=f"flows: {', '.join(project.flows)}")
    compiler = FlowCompiler(project, load_code=False)
    compiled = compiler.compile(flow_id)
    return FlowOut(
        id=flow_id,
        description=source.spec.description,
        file=source.doc.file,
        input_schema=compiled.input_schema if compiled else None,
        output_schema=compiled.output_schema if compiled else None,
        result=compiled.result if compiled else source.spec.result,
        nodes=[_node_json(n) for n in compiled.nodes] if compiled else [],
        diagnostics=compiler.diagnostics,
    )


def datasets(svc: ProjectService) -> list[DatasetItem]:
    project = svc.project()
    out = []
    for did, ds in sorted(project.datasets.items()):
        dev = sum(project.side(c.name) == "dev" for c in ds.cases)
        out.append(
            DatasetItem(id=did, description=ds.description, cases=len(ds.cases), dev=dev, holdout=len(ds.cases) - dev)
        )
    return out


def dataset(svc: ProjectService, dataset_id: str) -> DatasetOut:
    """A dataset's working (dev) cases one by one; held-out cases are only counted."""
    project = svc.project()
    ds = project.datasets.get(dataset_id)
    if ds is None:
        raise NotFoundError(
            f"no dataset {dataset_id!r}", code="DATASET_NOT_FOUND", hint=f"datasets: {', '.join(project.datasets)}"
        )
    dev = [c for c in ds.cases if project.side(c.name) == "dev"]
    return DatasetOut(
        id=dataset_id,
        description=ds.description,
        cases=dev,
        dev=len(dev),
        holdout=len(ds.cases) - len(dev),
        hidden_cases=len(ds.cases) - len(dev),
    )


def agents(svc: ProjectService) -> list[AgentItem]:
    return [
        AgentItem(
            id=aid,
            model=a.model,
            description=a.description,
            output_mode=a.output_mode,
            simulator=a.simulator,
            settings=a.settings.model_dump(exclude_none=True),
        )
        for aid, a in sorted(svc.project().agents.items())
    ]


def workers(svc: ProjectService, *, ended: bool = False) -> WorkersOut:
    """The `aqven worker`s of the project's store (none on SQLite: workers need a shared PostgreSQL store)."""
    rows = WorkerStore(svc.db).listing(ended=ended)
    items = [WorkerItem(**{k: v for k, v in r.to_json().items() if k != "beats"}) for r in rows]
    return WorkersOut(cluster=cluster_wanted(), workers=items)
