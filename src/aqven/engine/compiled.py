"""A compiled flow: nodes resolved to their agents, prompt texts, code and called flows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aqven.project.schema import AgentSpec, Node


@dataclass
class CompiledNode:
    id: str
    kind: str
    spec: Node
    deps: set[str]  # ids of nodes in the same scope this node waits for
    output_schema: dict[str, Any]
    agent: AgentSpec | None = None
    prompt_text: str | None = None
    prompt_file: str | None = None
    code_file: Path | None = None
    code_function: str | None = None
    called: CompiledFlow | None = None
    called_id: str | None = None  # the flow a call node calls (after a variant's patch)
    children: list[CompiledNode] = field(default_factory=list)
    result: str | None = None  # a group's result binding
    src_file: str = ""  # where the node was written, for diagnostics
    src_path: tuple[str | int, ...] = ()

    @property
    def inputs(self) -> dict[str, Any]:
        return self.spec.inputs


@dataclass
class CompiledFlow:
    id: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    nodes: list[CompiledNode]  # top-level, in file order
    result: str  # binding for the flow's output
    folder: Path

    def top_ids(self) -> list[str]:
        return [n.id for n in self.nodes]

    def node(self, node_id: str) -> CompiledNode | None:
        for n in self.walk():
            if n.id == node_id:
                return n
        return None

    def walk(self) -> list[CompiledNode]:
        out: list[CompiledNode] = []

        def visit(nodes: list[CompiledNode]) -> None:
            for n in nodes:
                out.append(n)
                visit(n.children)

        visit(self.nodes)
        return out
