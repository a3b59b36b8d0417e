"""REST: the project, `aqven check`, flows, datasets and agents."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from aqven.engine.compile import FlowCompiler
from aqven.engine.compiled import CompiledNode
from aqven.errors import NotFoundError
from aqven.research.experiments.workspace import check_workspace
from aqven.research.launch.caps import confirm_project_cap, confirmed_project_cap
from aqven.server.deps import service_of
from aqven.server.security import approver_of
from aqven.server.service import ProjectService

router = APIRouter(prefix="/api", tags=["project"])


@router.get("/project")
def get_project(svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    project = svc.project()
    cap = confirmed_project_cap(
        project.root, project.config.research.spend_cap_usd if project.config.research else None
    )
    return {
        "root": str(project.root),
        "package": project.package,
        "name": project.config.name,
        "description": project.config.description,
        "spend_cap_usd": str(cap.cap),
        "spend_cap_source": cap.source,
        **cap.fields(),
        "project_cap_confirmed_at": cap.confirmed_at,
        "project_cap_confirmed_by": cap.channel,
        "flows": sorted(project.flows),
        "agents": sorted(project.agents),
        "datasets": sorted(project.datasets),
    }


class CapConfirmBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cap_usd: str | int | float = Field(description="the project cap the files ask for, as the person saw it")


@router.post("/project/cap/confirm")
def confirm_cap(body: CapConfirmBody, request: Request, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """A person confirms the project cap aqven.yaml (or the local override) asks for: new series get it."""
    who = approver_of(request.state, request.headers)
    project = svc.project()
    file_cap = project.config.research.spend_cap_usd if project.config.research else None
    confirm_project_cap(project.root, file_cap, body.cap_usd, who.channel, who.confirmed)
    return get_project(svc=svc)


@router.get("/check")
def get_check(svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    _ws, diagnostics = check_workspace(svc.root)
    errors = sum(d.severity == "error" for d in diagnostics)
    return {
        "ok": errors == 0,
        "errors": errors,
        "warnings": len(diagnostics) - errors,
        "diagnostics": [d.model_dump() for d in diagnostics],
    }


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


@router.get("/flows")
def list_flows(svc: ProjectService = Depends(service_of)) -> list[dict[str, Any]]:
    project = svc.project()
    return [
        {"id": fid, "description": src.spec.description, "nodes": [n.id for n in src.spec.nodes]}
        for fid, src in sorted(project.flows.items())
    ]


@router.get("/flows/{flow_id}")
def get_flow(flow_id: str, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    project = svc.project()
    source = project.flows.get(flow_id)
    if source is None:
        raise NotFoundError(f"no flow {flow_id!r}", code="FLOW_NOT_FOUND", hint=f"flows: {', '.join(project.flows)}")
    compiler = FlowCompiler(project, load_code=False)
    flow = compiler.compile(flow_id)
    return {
        "id": flow_id,
        "description": source.spec.description,
        "file": source.doc.file,
        "input_schema": flow.input_schema if flow else None,
        "output_schema": flow.output_schema if flow else None,
        "result": flow.result if flow else source.spec.result,
        "nodes": [_node_json(n) for n in flow.nodes] if flow else [],
        "diagnostics": [d.model_dump() for d in compiler.diagnostics],
    }


@router.get("/datasets")
def list_datasets(svc: ProjectService = Depends(service_of)) -> list[dict[str, Any]]:
    project = svc.project()
    out = []
    for did, ds in sorted(project.datasets.items()):
        dev = sum(project.side(c.name) == "dev" for c in ds.cases)
        out.append(
            {
                "id": did,
                "description": ds.description,
                "cases": len(ds.cases),
                "dev": dev,
                "holdout": len(ds.cases) - dev,
            }
        )
    return out


@router.get("/datasets/{dataset_id}")
def get_dataset(dataset_id: str, svc: ProjectService = Depends(service_of)) -> dict[str, Any]:
    """A dataset's working (dev) cases one by one; held-out cases are only counted."""
    project = svc.project()
    ds = project.datasets.get(dataset_id)
    if ds is None:
        raise NotFoundError(
            f"no dataset {dataset_id!r}", code="DATASET_NOT_FOUND", hint=f"datasets: {', '.join(project.datasets)}"
        )
    dev = [c for c in ds.cases if project.side(c.name) == "dev"]
    return {
        "id": dataset_id,
        "description": ds.description,
        "cases": [c.model_dump() for c in dev],
        "dev": len(dev),
        "holdout": len(ds.cases) - len(dev),
        "hidden_cases": len(ds.cases) - len(dev),
    }


@router.get("/agents")
def list_agents(svc: ProjectService = Depends(service_of)) -> list[dict[str, Any]]:
    return [
        {
            "id": aid,
            "model": a.model,
            "description": a.description,
            "output_mode": a.output_mode,
            "simulator": a.simulator,
            "settings": a.settings.model_dump(exclude_none=True),
        }
        for aid, a in sorted(svc.project().agents.items())
    ]
