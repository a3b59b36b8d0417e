"""REST: the project, `aqven check`, flows, datasets and agents (answers from `operations.project`)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from aqven.research.launch.caps import parse_cap
from aqven.server.deps import person_acting, service_of
from aqven.server.operations import project
from aqven.server.operations.models import (
    AgentItem,
    CheckOut,
    DatasetItem,
    DatasetOut,
    FlowItem,
    FlowOut,
    ProjectOut,
    WorkersOut,
)
from aqven.server.principals import PasskeyProof
from aqven.server.service import ProjectService

router = APIRouter(prefix="/api", tags=["project"])


class CapConfirmBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cap_usd: str | int | float = Field(description="the project cap the files ask for, as the person saw it")
    passkey: PasskeyProof | None = None  # Studio: an assertion bound to this amount


@router.get("/project")
def get_project(svc: ProjectService = Depends(service_of)) -> ProjectOut:
    return project.project_info(svc)


@router.post("/project/cap/confirm")
def confirm_cap(body: CapConfirmBody, request: Request, svc: ProjectService = Depends(service_of)) -> ProjectOut:
    """A person confirms the project cap aqven.yaml (or the local override) asks for: new series get it."""
    cap = parse_cap(body.cap_usd)
    who = person_acting(request, ("cap_confirm", "project", str(cap)), body.passkey)
    return project.confirm_cap(svc, body.cap_usd, who)


@router.get("/workers")
def list_workers(ended: bool = False, svc: ProjectService = Depends(service_of)) -> WorkersOut:
    """The `aqven worker`s of the project's shared store (live ones; `ended=true` adds the lost, stopped and
    refused ones)."""
    return project.workers(svc, ended=ended)


@router.get("/check")
def get_check(svc: ProjectService = Depends(service_of)) -> CheckOut:
    return project.check(svc)  # a sync route: FastAPI runs it on a worker thread


@router.get("/flows")
def list_flows(svc: ProjectService = Depends(service_of)) -> list[FlowItem]:
    return project.flows(svc)


@router.get("/flows/{flow_id}")
def get_flow(flow_id: str, svc: ProjectService = Depends(service_of)) -> FlowOut:
    return project.flow(svc, flow_id)


@router.get("/datasets")
def list_datasets(svc: ProjectService = Depends(service_of)) -> list[DatasetItem]:
    return project.datasets(svc)


@router.get("/datasets/{dataset_id}")
def get_dataset(dataset_id: str, svc: ProjectService = Depends(service_of)) -> DatasetOut:
    """A dataset's working (dev) cases one by one; held-out cases are only counted."""
    return project.dataset(svc, dataset_id)


@router.get("/agents")
def list_agents(svc: ProjectService = Depends(service_of)) -> list[AgentItem]:
    return project.agents(svc)
