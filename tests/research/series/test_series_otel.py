"""OpenTelemetry export: with AQVEN_OTEL_ENDPOINT set, a series' attempts arrive at a local OTLP/HTTP receiver on
127.0.0.1 as AQVEN spans tagged with series, experiment, variant, case and repeat, with pydantic-ai's model-call
spans under them; a held-out attempt carries its case's index only, and no held-out case name (nor a prompt)
appears anywhere in what was sent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from aqven.models import telemetry
from aqven.project.split import side_of
from support.series_kit import case_names, client_for, settle, start, tiny_environment, write_tiny


class Receiver:
    """An OTLP/HTTP trace receiver: keeps every request body and answers 200 with an empty export response."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path == "/v1/traces":
                    receiver.bodies.append(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attrs = {a.key: _value(a.value) for a in span.attributes}
                        out.append((span.name, attrs))
        return out


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Receiver]:
    tiny_environment(monkeypatch, tmp_path)
    rx = Receiver()
    monkeypatch.setenv("AQVEN_OTEL_ENDPOINT", rx.url)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    yield rx
    monkeypatch.delenv("AQVEN_OTEL_ENDPOINT")
    telemetry.tracer()  # the endpoint is gone: the exporter is shut down and spans are no-ops again
    rx.server.shutdown()


def test_attempts_are_exported_as_spans_without_held_out_names(receiver: Receiver, tmp_path: Path) -> None:
    names = case_names(3, 4, prefix="secretcase")
    root = write_tiny(tmp_path / "p", names, cap="5.00")
    dev = [n for n in names if side_of("tiny", n) == "dev"]
    held_out = [n for n in names if side_of("tiny", n) == "holdout"]
    with client_for(root) as client:
        for on in ("dev", "holdout"):
            sid = start(client, experiment_id="rate", on=on, simulate=True, repeats=2)["series"]["series_id"]
            assert settle(client, sid)["status"] == "done"
    assert telemetry.flush()
    spans = receiver.spans()
    attempts = [a for n, a in spans if n == "aqven.attempt"]
    assert len(attempts) == 2 * len(names)  # every attempt of both series, repeats included
    for a in attempts:
        assert a["aqven.experiment_id"] == "rate" and a["aqven.variant"] == "as_written"
        assert a["aqven.repeat"] in (0, 1) and a["aqven.simulated"] is True and a["aqven.series_id"].startswith("ser")
        assert a["aqven.outcome"] == "pass" and Decimal(a["aqven.cost_usd"]) == Decimal("0.01")
    dev_spans = [a for a in attempts if a["aqven.on"] == "dev"]
    assert sorted({a["aqven.case"] for a in dev_spans}) == sorted(dev)
    held = [a for a in attempts if a["aqven.on"] == "holdout"]
    assert len(held) == 2 * len(held_out) and all("aqven.case" not in a for a in held)
    assert sorted({a["aqven.case_index"] for a in held}) == list(range(len(held_out)))
    # pydantic-ai's spans of the model calls came too, without prompt text.
    assert any(n.startswith(("chat ", "invoke_agent", "agent run")) for n, _ in spans), {n for n, _ in spans}
    sent = b"".join(receiver.bodies)
    for name in held_out:
        assert name.encode() not in sent
    assert b"Answer this" not in sent and b"ticket " not in sent
