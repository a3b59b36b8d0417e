"""Where the MCP tools get their answers: the project service in this process, or the project server over HTTP.

`ServiceBackend` serves `/mcp` inside the project server and calls `ProjectService` directly. `HttpBackend`
serves `aqven mcp` (stdio) and calls the project server's REST API, starting the server when none runs. Both
return the REST API's JSON shapes, so the tools above them are the same over every transport.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio.to_thread

from aqven.errors import AqvenError, ServerError

T = TypeVar("T")


class Backend(Protocol):
    """The REST API's operations the MCP tools use, each answering the REST API's JSON."""

    async def project(self) -> dict[str, Any]: ...
    async def check(self) -> dict[str, Any]: ...
    async def list_flows(self) -> list[dict[str, Any]]: ...
    async def get_flow(self, flow_id: str) -> dict[str, Any]: ...
    async def list_datasets(self) -> list[dict[str, Any]]: ...
    async def get_dataset(self, dataset_id: str) -> dict[str, Any]: ...
    async def list_experiments(self) -> list[dict[str, Any]]: ...
    async def get_experiment(self, experiment_id: str) -> dict[str, Any]: ...
    async def findings(self) -> dict[str, Any]: ...
    async def series_start(self, body: dict[str, Any]) -> dict[str, Any]: ...
    async def series_list(self, experiment_id: str | None, limit: int) -> list[dict[str, Any]]: ...
    async def series_get(self, series_id: str, wait_seconds: float, include_cases: bool) -> dict[str, Any]: ...
    async def series_cancel(self, series_id: str, reason: str | None) -> dict[str, Any]: ...
    async def run_start(self, body: dict[str, Any], wait_seconds: float) -> dict[str, Any]: ...
    async def run_get(self, run_id: str, wait_seconds: float) -> dict[str, Any]: ...
    async def run_events(self, run_id: str, after: int, limit: int) -> list[dict[str, Any]]: ...
    async def run_node(self, run_id: str, node_id: str) -> dict[str, Any]: ...


# ---- in the project server ------------------------------------------------------------------------------------


class ServiceBackend:
    """The project service of this process (the `/mcp` endpoint of the project server)."""

    def __init__(self, service: Any) -> None:
        from aqven.server.service import ProjectService

        self.svc: ProjectService = service

    async def project(self) -> dict[str, Any]:
        from aqven.server.routes_project import get_project

        return get_project(svc=self.svc)

    async def check(self) -> dict[str, Any]:
        from aqven.server.routes_project import get_check

        return await anyio.to_thread.run_sync(functools.partial(get_check, svc=self.svc))

    async def list_flows(self) -> list[dict[str, Any]]:
        from aqven.server.routes_project import list_flows

        return list_flows(svc=self.svc)

    async def get_flow(self, flow_id: str) -> dict[str, Any]:
        from aqven.server.routes_project import get_flow

        return await anyio.to_thread.run_sync(functools.partial(get_flow, flow_id, svc=self.svc))

    async def list_datasets(self) -> list[dict[str, Any]]:
        from aqven.server.routes_project import list_datasets

        return list_datasets(svc=self.svc)

    async def get_dataset(self, dataset_id: str) -> dict[str, Any]:
        from aqven.server.routes_project import get_dataset

        return get_dataset(dataset_id, svc=self.svc)

    async def list_experiments(self) -> list[dict[str, Any]]:
        from aqven.server.routes_research import list_experiments

        return list_experiments(svc=self.svc)

    async def get_experiment(self, experiment_id: str) -> dict[str, Any]:
        from aqven.server.routes_research import get_experiment

        return get_experiment(experiment_id, svc=self.svc)

    async def findings(self) -> dict[str, Any]:
        from aqven.server.routes_research import list_findings

        return list_findings(svc=self.svc)

    async def series_start(self, body: dict[str, Any]) -> dict[str, Any]:
        from aqven.research.series.start import SeriesStartBody

        return await self.svc.series.start(SeriesStartBody.model_validate(body))

    async def series_list(self, experiment_id: str | None, limit: int) -> list[dict[str, Any]]:
        return self.svc.series.list_series(experiment_id=experiment_id, limit=limit)

    async def series_get(self, series_id: str, wait_seconds: float, include_cases: bool) -> dict[str, Any]:
        return await self.svc.series.get(series_id, wait_seconds=wait_seconds, include_cases=include_cases)

    async def series_cancel(self, series_id: str, reason: str | None) -> dict[str, Any]:
        return await self.svc.series.cancel(series_id, reason)

    async def run_start(self, body: dict[str, Any], wait_seconds: float) -> dict[str, Any]:
        request = self.svc.build_request(body)
        run_id = self.svc.start_run(request)
        if wait_seconds > 0:
            return (await self.svc.wait_run(run_id, wait_seconds)).model_dump(mode="json")
        return self.svc.runs.get(run_id).model_dump(mode="json")

    async def run_get(self, run_id: str, wait_seconds: float) -> dict[str, Any]:
        from aqven.server.routes_runs import get_run

        return (await get_run(run_id, wait_seconds=wait_seconds, svc=self.svc)).model_dump(mode="json")

    async def run_events(self, run_id: str, after: int, limit: int) -> list[dict[str, Any]]:
        from aqven.server.routes_runs import run_events

        return [e.model_dump(mode="json") for e in run_events(run_id, after=after, limit=limit, svc=self.svc)]

    async def run_node(self, run_id: str, node_id: str) -> dict[str, Any]:
        from aqven.server.routes_runs import run_node

        return run_node(run_id, node_id, svc=self.svc).model_dump(mode="json")


# ---- over HTTP (aqven mcp) ------------------------------------------------------------------------------------


def _q(segment: str, safe: str = "") -> str:
    return urllib.parse.quote(segment, safe=safe)


class HttpBackend:
    """The project server's REST API, for `aqven mcp`. The server is started in the background when none runs
    (the MCP handshake does not wait for it; the first tool call does), and started again when it stopped
    between two calls."""

    def __init__(self, root: Path) -> None:
        from aqven.server.client import Client

        self.root = root.resolve()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aqven-server")
        self._client: Future[Client] = self._pool.submit(Client, self.root)

    def _call(self, fn: Callable[[Any], T], *, idempotent: bool) -> T:
        from aqven.server.client import Client
        from aqven.server.lifecycle import read_server

        try:
            client = self._client.result()
        except AqvenError:  # SERVER_START_FAILED: say so now, and try again on the next call
            self._client = self._pool.submit(Client, self.root)
            raise
        try:
            return fn(client)
        except ServerError as exc:
            info = read_server(self.root)
            if info is not None and info.get("healthy"):
                raise  # the server runs: the request itself failed
            client.connect()  # it stopped since the last call: start it again (a new server has a new token)
            if idempotent or "Connection refused" in exc.message:  # a refused request never reached it
                return fn(client)
            raise

    async def _request(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        q = {k: ("true" if v is True else "false" if v is False else v) for k, v in query.items() if v is not None}

        def send(client: Any) -> Any:
            return client.request(method, path, body, query=q or None)

        call = functools.partial(self._call, send, idempotent=method == "GET")
        return await anyio.to_thread.run_sync(call)

    async def project(self) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", "/api/project")
        return out

    async def check(self) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", "/api/check")
        return out

    async def list_flows(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = await self._request("GET", "/api/flows")
        return out

    async def get_flow(self, flow_id: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", f"/api/flows/{_q(flow_id)}")
        return out

    async def list_datasets(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = await self._request("GET", "/api/datasets")
        return out

    async def get_dataset(self, dataset_id: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", f"/api/datasets/{_q(dataset_id)}")
        return out

    async def list_experiments(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = await self._request("GET", "/api/experiments")
        return out

    async def get_experiment(self, experiment_id: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", f"/api/experiments/{_q(experiment_id)}")
        return out

    async def findings(self) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", "/api/findings")
        return out

    async def series_start(self, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("POST", "/api/series", body)
        return out

    async def series_list(self, experiment_id: str | None, limit: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = await self._request("GET", "/api/series", experiment_id=experiment_id, limit=limit)
        return out

    async def series_get(self, series_id: str, wait_seconds: float, include_cases: bool) -> dict[str, Any]:
        out: dict[str, Any] = await self._request(
            "GET", f"/api/series/{_q(series_id)}", wait_seconds=wait_seconds, include_cases=include_cases
        )
        return out

    async def series_cancel(self, series_id: str, reason: str | None) -> dict[str, Any]:
        body = {"reason": reason} if reason is not None else {}
        out: dict[str, Any] = await self._request("POST", f"/api/series/{_q(series_id)}/cancel", body)
        return out

    async def run_start(self, body: dict[str, Any], wait_seconds: float) -> dict[str, Any]:
        payload = {**body, "wait": wait_seconds > 0, "wait_seconds": wait_seconds}
        out: dict[str, Any] = await self._request("POST", "/api/runs", payload)
        return out

    async def run_get(self, run_id: str, wait_seconds: float) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", f"/api/runs/{_q(run_id)}", wait_seconds=wait_seconds)
        return out

    async def run_events(self, run_id: str, after: int, limit: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = await self._request(
            "GET", f"/api/runs/{_q(run_id)}/events", after=after, limit=limit
        )
        return out

    async def run_node(self, run_id: str, node_id: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", f"/api/runs/{_q(run_id)}/nodes/{_q(node_id, safe='/')}")
        return out
