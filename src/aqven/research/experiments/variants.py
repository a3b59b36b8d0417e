"""Variant assembly: each variant of an experiment as a patch of its subject flow, by the kind of what it varies.

`VARIANT_KINDS` holds, per ``varies.what``, the node kind it varies and how a value patches the flow; adding
a kind is one entry here (and its name in the schema's `VariesWhat`), plus its test and doc.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, get_args

from pydantic import TypeAdapter, ValidationError

from aqven.engine.variant import AlternativeNode, FlowPatch
from aqven.errors import ProjectError
from aqven.project.diagnostics import Diagnostic, Diagnostics
from aqven.project.loader import Project, validation_diagnostics
from aqven.project.paths import inside, rel
from aqven.project.schema import Node
from aqven.project.yaml_source import read_yaml
from aqven.research.experiments.schema import ExperimentSource, VariesWhat

NODE_ADAPTER: TypeAdapter[Node] = TypeAdapter(Node)
Where = tuple[str | int, ...]


class Assembly:
    """Variant assembly of one experiment, collecting what is wrong as diagnostics (`aqven check` reads them)."""

    def __init__(self, project: Project, exp: ExperimentSource) -> None:
        self.project, self.exp = project, exp
        self.diagnostics = Diagnostics()

    def err(self, code: str, message: str, path: Where, hint: str) -> None:
        self.diagnostics.error(
            code, message, file=self.exp.file, line=self.project.doc_line(self.exp.file, path), hint=hint
        )

    def patch(self, variant_index: int) -> FlowPatch:
        spec = self.exp.spec
        variant = spec.variants[variant_index]
        patch = FlowPatch(local_flows=dict(self.exp.local_flows))
        varies = spec.varies
        for node_id, value in variant.nodes.items():
            where = ("variants", variant_index, "nodes", node_id)
            if varies is None:
                self.err(
                    "E_VARIANT_WITHOUT_FACTOR",
                    f"variant {variant.id!r} sets values but the experiment has no varies",
                    where,
                    "add varies: {what: ..., nodes: [...]} naming the factor",
                )
                continue
            if node_id not in varies.nodes:
                self.err(
                    "E_VARIANT_NODE",
                    f"variant {variant.id!r} sets node {node_id!r}, which varies.nodes does not list",
                    where,
                    f"a variant only sets the varied nodes: {', '.join(varies.nodes)}",
                )
                continue
            VARIANT_KINDS[varies.what].apply(self, patch, variant.id, node_id, value, where)
        return patch

    def file(self, relative: str, where: Where, what: str) -> Path | None:
        line = self.project.doc_line(self.exp.file, where)
        try:
            path = inside(self.project.root, self.exp.folder, relative, file=self.exp.file, line=line)
        except ProjectError as exc:
            self.err(exc.code, exc.message, where, exc.hint)
            return None
        if not path.is_file():
            self.err(
                "E_FILE_MISSING",
                f"{what} file {rel(self.project.root, path)!r} is missing",
                where,
                f"create {rel(self.project.root, path)}",
            )
            return None
        return path

    def alternative(self, name: str, where: Where) -> AlternativeNode | None:
        path = self.file(f"nodes/{name}/{name}.node.yaml", where, "alternative node")
        if path is None:
            return None
        file = rel(self.project.root, path)
        try:
            doc = read_yaml(path, file)
        except ProjectError as exc:
            self.diagnostics.append(Diagnostic.from_error(exc))
            return None
        self.project.docs[file] = doc
        data = dict(doc.data) if isinstance(doc.data, dict) else None
        if data is None:
            self.diagnostics.append(
                Diagnostic(
                    code="E_NOT_MAPPING",
                    severity="error",
                    file=file,
                    line=1,
                    message="an alternative node file holds one node as a mapping",
                    hint="write kind:, and the keys of that node kind",
                )
            )
            return None
        data.setdefault("id", name)
        try:
            spec = NODE_ADAPTER.validate_python(data)
        except ValidationError as err:
            self.diagnostics.extend(validation_diagnostics(err, doc))
            return None
        return AlternativeNode(spec=spec, folder=path.parent, file=file)


def variant_patch(project: Project, exp: ExperimentSource, variant_id: str) -> FlowPatch:
    """The patch that turns the subject flow into `variant_id`; raises when it cannot be assembled."""
    index = exp.spec.variant_ids.index(variant_id)
    assembly = Assembly(project, exp)
    patch = assembly.patch(index)
    if assembly.diagnostics:
        first = assembly.diagnostics[0]
        raise ProjectError(first.message, code=first.code, file=first.file, line=first.line, hint=first.hint)
    return patch


def _vary_agent(a: Assembly, patch: FlowPatch, variant: str, node_id: str, value: str, where: Where) -> None:
    if value not in a.project.agents:
        a.err(
            "E_UNKNOWN_AGENT",
            f"variant {variant!r} gives {node_id!r} agent {value!r}, which does not exist",
            where,
            f"agents: {', '.join(sorted(a.project.agents))}",
        )
        return
    patch.agents[node_id] = value


def _vary_prompt(a: Assembly, patch: FlowPatch, variant: str, node_id: str, value: str, where: Where) -> None:
    path = a.file(f"prompts/{value}.md", where, "prompt")
    if path is not None:
        patch.prompts[node_id] = path


def _vary_use(a: Assembly, patch: FlowPatch, variant: str, node_id: str, value: str, where: Where) -> None:
    alt = a.alternative(value, where)
    if alt is not None:
        patch.nodes[node_id] = alt


def _vary_flow(a: Assembly, patch: FlowPatch, variant: str, node_id: str, value: str, where: Where) -> None:
    if value not in a.exp.local_flows and value not in a.project.flows:
        a.err(
            "E_UNKNOWN_FLOW",
            f"variant {variant!r} plugs flow {value!r} into {node_id!r}; no such flow",
            where,
            "a local flow in the experiment's flows/, or a project flow",
        )
        return
    patch.flows[node_id] = value


@dataclass(frozen=True)
class VariantKind:
    """One ``varies.what``: the node kind it varies (None: any node), how a variant's value patches the subject
    flow, and whether the patched flow must take and return the same types as the one it replaces."""

    name: VariesWhat
    node_kind: str | None
    apply: Callable[[Assembly, FlowPatch, str, str, str, Where], None]
    same_types: bool = False


VARIANT_KINDS: Final[dict[str, VariantKind]] = {
    k.name: k
    for k in (
        VariantKind("agent", "llm", _vary_agent),
        VariantKind("prompt", "llm", _vary_prompt),
        VariantKind("use", None, _vary_use),
        VariantKind("flow", "call", _vary_flow, same_types=True),
    )
}
assert set(VARIANT_KINDS) == set(get_args(VariesWhat)), "every VariesWhat has one entry, and only those"
FACTOR_KIND_HINT: Final = "agent and prompt vary llm nodes; flow varies call nodes; use varies any node"
