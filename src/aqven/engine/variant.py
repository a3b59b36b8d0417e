"""A variant's patch to a flow: which node gets another agent, prompt, node or called flow."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aqven.project.loader import FlowSource
from aqven.project.schema import Node


@dataclass
class AlternativeNode:
    """A `use` alternative: an ordinary node that runs under the slot's id, read from `folder`."""

    spec: Node
    folder: Path
    file: str


@dataclass
class FlowPatch:
    agents: dict[str, str] = field(default_factory=dict)  # node id -> agent id
    prompts: dict[str, Path] = field(default_factory=dict)  # node id -> prompt file
    nodes: dict[str, AlternativeNode] = field(default_factory=dict)  # node id -> alternative
    flows: dict[str, str] = field(default_factory=dict)  # call node id -> flow id
    local_flows: dict[str, FlowSource] = field(default_factory=dict)  # searched before the project's

    def is_empty(self) -> bool:
        return not (self.agents or self.prompts or self.nodes or self.flows)
