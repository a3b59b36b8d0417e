"""Compile a flow: resolve every node, check bindings, types, files and calls.

Compiling never runs anything. Problems become diagnostics with file:line; `compile_flow` raises one
`ProjectError` listing them when the flow cannot run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aqven.engine.compiled import CompiledFlow, CompiledNode
from aqven.engine.template import placeholders
from aqven.engine.variant import FlowPatch
from aqven.errors import ProjectError
from aqven.project.bindings import Binding, BindingSyntaxError, bindings_in, is_binding, parse_binding
from aqven.project.diagnostics import Diagnostic
from aqven.project.loader import FlowSource, Project
from aqven.project.paths import inside, rel
from aqven.project.pycode import load_function
from aqven.project.schema import CallNode, CodeNode, GroupNode, HumanNode, LlmNode, Node, walk_nodes
from aqven.project.types import ANY, TypeSpecError, compatible, describe, schema_at, to_json_schema
from aqven.project.yaml_source import PathKey


class _Where:
    """Where a node was written: its file and its path inside that file's YAML."""

    def __init__(self, project: Project, file: str, ypath: PathKey) -> None:
        self.project, self.file, self.ypath = project, file, ypath

    def at(self, *more: str | int) -> tuple[str, int | None]:
        return self.file, self.project.doc_line(self.file, (*self.ypath, *more))

    def child(self, *more: str | int) -> _Where:
        return _Where(self.project, self.file, (*self.ypath, *more))


class FlowCompiler:
    def __init__(self, project: Project, patch: FlowPatch | None = None, *, load_code: bool = True) -> None:
        self.project = project
        self.patch = patch or FlowPatch()
        self.load_code = load_code
        self.diagnostics: list[Diagnostic] = []
        self._stack: list[str] = []
        self._done: dict[str, CompiledFlow | None] = {}

    # ---- diagnostics ----

    def _err(self, code: str, message: str, where: tuple[str, int | None], hint: str = "") -> None:
        file, line = where
        self.diagnostics.append(
            Diagnostic(code=code, severity="error", file=file, line=line, message=message, hint=hint)
        )

    def _warn(self, code: str, message: str, where: tuple[str, int | None], hint: str = "") -> None:
        file, line = where
        self.diagnostics.append(
            Diagnostic(code=code, severity="warning", file=file, line=line, message=message, hint=hint)
        )

    # ---- flows ----

    def find_flow(self, flow_id: str) -> FlowSource | None:
        return self.patch.local_flows.get(flow_id) or self.project.flows.get(flow_id)

    def compile(self, flow_id: str, *, where: tuple[str, int | None] | None = None) -> CompiledFlow | None:
        source = self.find_flow(flow_id)
        if source is None:
            self._err(
                "E_UNKNOWN_FLOW",
                f"no flow {flow_id!r}",
                where or ("flows", None),
                hint=f"flows: {', '.join(sorted(self.project.flows)) or 'none'}",
            )
            return None
        top = not self._stack
        if flow_id in self._stack:
            chain = " -> ".join([*self._stack, flow_id])
            self._err(
                "E_CALL_CYCLE",
                f"flows call each other in a cycle: {chain}",
                where or (source.doc.file, 1),
                hint="a flow may not call itself, directly or through other flows",
            )
            return None
        if not top and flow_id in self._done:
            return self._done[flow_id]
        self._stack.append(flow_id)
        try:
            compiled = self._compile_source(source, patch=self.patch if top else FlowPatch())
        finally:
            self._stack.pop()
        if not top:
            self._done[flow_id] = compiled
        return compiled

    def _schema(self, spec: Any, where: tuple[str, int | None]) -> dict[str, Any]:
        try:
            return to_json_schema(spec)
        except TypeSpecError as exc:
            self._err("E_TYPE_INVALID", str(exc), where, hint="see docs/reference/types.md")
            return dict(ANY)

    def _compile_source(self, source: FlowSource, patch: FlowPatch) -> CompiledFlow | None:
        spec = source.spec
        fw = _Where(self.project, source.doc.file, ())
        before = len([d for d in self.diagnostics if d.severity == "error"])
        input_schema = self._schema(spec.input, fw.at("input"))
        output_schema = self._schema(spec.output, fw.at("output"))

        seen: dict[str, int] = {}
        for node in walk_nodes(spec.nodes):
            seen[node.id] = seen.get(node.id, 0) + 1
        for node_id, count in seen.items():
            if count > 1:
                self._err(
                    "E_DUPLICATE_NODE",
                    f"node id {node_id!r} is used {count} times in flow {spec.id!r}",
                    fw.at("nodes"),
                    hint="node ids are unique within a flow, group children included",
                )
        for target in [*patch.agents, *patch.prompts, *patch.nodes, *patch.flows]:
            if target not in seen:
                self._err(
                    "E_UNKNOWN_NODE",
                    f"the variant names node {target!r}, which flow {spec.id!r} lacks",
                    fw.at("nodes"),
                    hint="varies.nodes must name nodes of the subject flow",
                )

        nodes = [self._node(n, source, fw.child("nodes", i), patch) for i, n in enumerate(spec.nodes)]
        index = {n.id: n for n in _walk(nodes)}
        scope_of: dict[str, str | None] = {}
        for n in nodes:
            scope_of[n.id] = None
            self._scope_children(n, scope_of)
        for n in nodes:
            self._group_schema(n, index)

        ctx = _Ctx(input_schema=input_schema, index=index, scope_of=scope_of, flow_id=spec.id)
        self._check_scope(nodes, None, ctx, fw.child("nodes"))

        result = spec.result or f"${nodes[-1].id}.out"
        rschema = self._binding_schema(result, None, ctx, fw.at("result"), owner=None)
        if rschema is not None and not compatible(rschema, output_schema):
            self._err(
                "E_BINDING_TYPE",
                f"flow {spec.id!r} returns {describe(rschema)} but declares output {describe(output_schema)}",
                fw.at("result" if spec.result else "output"),
                hint="make the result binding and the declared output type agree",
            )
        errors_now = len([d for d in self.diagnostics if d.severity == "error"])
        if errors_now > before:
            return None
        return CompiledFlow(
            id=spec.id,
            input_schema=input_schema,
            output_schema=output_schema,
            nodes=nodes,
            result=result,
            folder=source.folder,
        )

    def _scope_children(self, node: CompiledNode, scope_of: dict[str, str | None]) -> None:
        for child in node.children:
            scope_of[child.id] = node.id
            self._scope_children(child, scope_of)

    # ---- nodes ----

    def _node(self, spec: Node, source: FlowSource, where: _Where, patch: FlowPatch) -> CompiledNode:
        folder = source.folder
        if spec.id in patch.nodes:
            alt = patch.nodes[spec.id]
            spec = alt.spec.model_copy(update={"id": spec.id})
            folder = alt.folder
            where = _Where(self.project, alt.file, ())
        node = CompiledNode(
            id=spec.id,
            kind=spec.kind,
            spec=spec,
            deps=set(),
            output_schema=dict(ANY),
            src_file=where.file,
            src_path=where.ypath,
        )
        if isinstance(spec, LlmNode):
            agent_id = patch.agents.get(spec.id, spec.agent)
            node.agent = self.project.agents.get(agent_id)
            if node.agent is None:
                self._err(
                    "E_UNKNOWN_AGENT",
                    f"node {spec.id!r} uses agent {agent_id!r}, which does not exist",
                    where.at("agent"),
                    hint=f"agents: {', '.join(sorted(self.project.agents)) or 'none'}",
                )
            prompt_path: Path | None
            if spec.id in patch.prompts:
                prompt_path = patch.prompts[spec.id]
            else:
                prompt_path = self._file(folder, spec.prompt, where.at("prompt"), "prompt")
            if prompt_path is not None:
                if not prompt_path.is_file():
                    self._err(
                        "E_FILE_MISSING",
                        f"prompt file {rel(self.project.root, prompt_path)!r} is missing",
                        where.at("prompt"),
                        hint="create the file or fix the path (relative to the flow)",
                    )
                else:
                    node.prompt_text = prompt_path.read_text(encoding="utf-8", errors="replace")
                    node.prompt_file = rel(self.project.root, prompt_path)
                    unbound = sorted(set(placeholders(node.prompt_text)) - set(spec.inputs))
                    if unbound:
                        self._err(
                            "E_PROMPT_UNBOUND",
                            f"prompt {node.prompt_file} reads {', '.join(unbound)}, not among the node's inputs",
                            where.at("prompt"),
                            hint="add them to the node's inputs, or fix the placeholders",
                        )
            node.output_schema = self._schema(spec.output, where.at("output"))
        elif isinstance(spec, CodeNode):
            file_part, _, fn_name = spec.code.rpartition(":")
            path = self._file(folder, file_part, where.at("code"), "code")
            node.code_function = fn_name
            if path is not None:
                if not path.is_file():
                    self._err(
                        "E_FILE_MISSING",
                        f"code file {rel(self.project.root, path)!r} is missing",
                        where.at("code"),
                        hint="create the file or fix the path (relative to the flow)",
                    )
                else:
                    node.code_file = path
                    if self.load_code:
                        try:
                            load_function(self.project.root, path, fn_name)
                        except ProjectError as exc:
                            self._err(
                                exc.code,
                                exc.message,
                                (exc.file or where.file, exc.line or where.at("code")[1]),
                                exc.hint,
                            )
            node.output_schema = self._schema(spec.output, where.at("output"))
        elif isinstance(spec, CallNode):
            flow_id = patch.flows.get(spec.id, spec.flow)
            node.called = self.compile(flow_id, where=where.at("flow"))
            if node.called is not None:
                node.output_schema = node.called.output_schema
        elif isinstance(spec, HumanNode):
            node.output_schema = self._schema(spec.output, where.at("output"))
        elif isinstance(spec, GroupNode):
            node.children = [self._node(c, source, where.child("nodes", i), patch) for i, c in enumerate(spec.nodes)]
            node.result = spec.result or (f"${spec.nodes[-1].id}.out" if spec.nodes else None)
            if not spec.nodes:
                self._err(
                    "E_EMPTY_GROUP",
                    f"group {spec.id!r} has no nodes",
                    where.at("nodes"),
                    hint="a group holds at least one node",
                )
        return node

    def _file(self, folder: Path, relative: str, where: tuple[str, int | None], what: str) -> Path | None:
        try:
            return inside(self.project.root, folder, relative, file=where[0], line=where[1])
        except ProjectError as exc:
            self._err(exc.code, f"{what} {exc.message}", where, exc.hint)
            return None

    def _group_schema(self, node: CompiledNode, index: dict[str, CompiledNode]) -> None:
        for child in node.children:
            self._group_schema(child, index)
        if node.kind == "group" and node.result and is_binding(node.result):
            try:
                b = parse_binding(node.result)
            except BindingSyntaxError:
                return
            if b.source == "node" and b.node in index:
                node.output_schema = schema_at(index[b.node].output_schema, list(b.fields)) or dict(ANY)

    # ---- bindings ----

    def _check_scope(self, nodes: list[CompiledNode], group: str | None, ctx: _Ctx, where: _Where) -> None:
        ids = {n.id for n in nodes}
        for _i, node in enumerate(nodes):
            nw = _Where(self.project, node.src_file, node.src_path)
            for key, value in node.inputs.items():
                try:
                    found = bindings_in(value)
                except BindingSyntaxError as exc:
                    self._err("E_BINDING_SYNTAX", str(exc), nw.at("inputs", key), hint="see docs/reference/bindings.md")
                    continue
                for b in found:
                    self._check_binding(b, node, group, ctx, nw.at("inputs", key))
                    if b.source == "node" and b.node in ids and b.node != node.id:
                        node.deps.add(b.node)
            if node.kind == "call" and node.called is not None:
                self._check_call_inputs(node, ctx, nw)
            if node.children:
                self._check_scope(node.children, node.id, ctx, nw.child("nodes"))
                for child in _walk(node.children):
                    for value in child.inputs.values():
                        try:
                            for b in bindings_in(value):
                                if b.source == "node" and b.node in ids and b.node != node.id:
                                    node.deps.add(b.node)
                        except BindingSyntaxError:
                            pass
                if node.result:
                    self._binding_schema(node.result, node.id, ctx, nw.at("result"), owner=node.id)
        self._check_cycles(nodes, where)

    def _check_binding(
        self, b: Binding, node: CompiledNode, group: str | None, ctx: _Ctx, where: tuple[str, int | None]
    ) -> None:
        self._binding_schema(b.text, group, ctx, where, owner=node.id)

    def _binding_schema(
        self, text: str, group: str | None, ctx: _Ctx, where: tuple[str, int | None], owner: str | None
    ) -> dict[str, Any] | None:
        try:
            b = parse_binding(text)
        except BindingSyntaxError as exc:
            self._err("E_BINDING_SYNTAX", str(exc), where, hint="see docs/reference/bindings.md")
            return None
        if b.source == "context":
            return dict(ANY)
        if b.source == "input":
            schema = schema_at(ctx.input_schema, list(b.fields))
            if schema is None:
                self._err(
                    "E_BINDING_FIELD",
                    f"{text}: flow {ctx.flow_id!r} has no input field {'.'.join(b.fields)!r}",
                    where,
                    hint=f"its input is {describe(ctx.input_schema)}",
                )
            return schema
        assert b.node is not None
        if b.node not in ctx.index:
            self._err(
                "E_UNKNOWN_NODE",
                f"{text}: flow {ctx.flow_id!r} has no node {b.node!r}",
                where,
                hint=f"nodes: {', '.join(ctx.index)}",
            )
            return None
        if b.node == owner:
            self._err(
                "E_BINDING_CYCLE",
                f"{text}: node {owner!r} reads its own output",
                where,
                hint="a node reads the outputs of other nodes only",
            )
            return None
        target_scope = ctx.scope_of.get(b.node)
        if target_scope is not None and not _within(group, target_scope, ctx.scope_of):
            self._err(
                "E_BINDING_SCOPE",
                f"{text}: node {b.node!r} is inside group {target_scope!r} and cannot be read from here",
                where,
                hint=f"read the group's output instead: ${_outermost(target_scope, ctx.scope_of)}.out",
            )
            return None
        schema = schema_at(ctx.index[b.node].output_schema, list(b.fields))
        if schema is None:
            self._err(
                "E_BINDING_FIELD",
                f"{text}: the output of {b.node!r} ({describe(ctx.index[b.node].output_schema)}) has no "
                f"field {'.'.join(b.fields)!r}",
                where,
                hint="fix the field path",
            )
        return schema

    def _check_call_inputs(self, node: CompiledNode, ctx: _Ctx, where: _Where) -> None:
        assert node.called is not None
        target = node.called.input_schema
        props = target.get("properties") or {}
        if target.get("type") == "object":
            for name in target.get("required", []):
                if name not in node.inputs:
                    self._err(
                        "E_BINDING_TYPE",
                        f"call node {node.id!r} does not give input {name!r} that flow {node.called.id!r} needs",
                        where.at("inputs"),
                        hint=f"flow {node.called.id!r} takes {describe(target)}",
                    )
            for name, value in node.inputs.items():
                if props and name not in props:
                    self._err(
                        "E_BINDING_TYPE",
                        f"flow {node.called.id!r} has no input {name!r}",
                        where.at("inputs", name),
                        hint=f"it takes {describe(target)}",
                    )
                    continue
                source = _literal_schema(value) if not is_binding(value) else None
                if is_binding(value):
                    try:
                        source = self._quiet_schema(parse_binding(value), ctx)
                    except BindingSyntaxError:
                        source = None
                if source is not None and name in props and not compatible(source, props[name]):
                    self._err(
                        "E_BINDING_TYPE",
                        f"input {name!r} of call node {node.id!r} gets {describe(source)}, "
                        f"but flow {node.called.id!r} wants {describe(props[name])}",
                        where.at("inputs", name),
                        hint="bind a value of the right type",
                    )

    def _quiet_schema(self, b: Binding, ctx: _Ctx) -> dict[str, Any] | None:
        if b.source == "input":
            return schema_at(ctx.input_schema, list(b.fields))
        if b.source == "node" and b.node in ctx.index:
            return schema_at(ctx.index[b.node].output_schema, list(b.fields))
        return None

    def _check_cycles(self, nodes: list[CompiledNode], where: _Where) -> None:
        deps = {n.id: set(n.deps) for n in nodes}
        done: set[str] = set()
        while True:
            ready = [n for n, d in deps.items() if n not in done and d <= done]
            if not ready:
                break
            done.update(ready)
        stuck = sorted(set(deps) - done)
        if stuck:
            self._err(
                "E_BINDING_CYCLE",
                f"nodes wait for each other in a cycle: {', '.join(stuck)}",
                where.at(),
                hint="break the cycle: a node may only read nodes that do not read it",
            )


class _Ctx:
    def __init__(
        self,
        *,
        input_schema: dict[str, Any],
        index: dict[str, CompiledNode],
        scope_of: dict[str, str | None],
        flow_id: str,
    ) -> None:
        self.input_schema, self.index, self.scope_of, self.flow_id = input_schema, index, scope_of, flow_id


def _walk(nodes: list[CompiledNode]) -> list[CompiledNode]:
    out: list[CompiledNode] = []
    for n in nodes:
        out.append(n)
        out.extend(_walk(n.children))
    return out


def _within(group: str | None, target_scope: str, scope_of: dict[str, str | None]) -> bool:
    """Whether code in `group` may read a node whose scope is `target_scope` (same group or an enclosing one)."""
    current = group
    while current is not None:
        if current == target_scope:
            return True
        current = scope_of.get(current)
    return False


def _outermost(scope: str, scope_of: dict[str, str | None]) -> str:
    while scope_of.get(scope) is not None:
        scope = scope_of[scope]  # type: ignore[assignment]
    return scope


def _literal_schema(value: Any) -> dict[str, Any] | None:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if isinstance(value, dict) and not bindings_in(value):
        return {"type": "object"}
    return None


def compile_flow(project: Project, flow_id: str, patch: FlowPatch | None = None) -> CompiledFlow:
    """Compile `flow_id`, raising one `ProjectError` (code of the first problem) when it cannot run."""
    compiler = FlowCompiler(project, patch)
    flow = compiler.compile(flow_id)
    errors = [d for d in compiler.diagnostics if d.severity == "error"]
    if flow is None or errors:
        first = errors[0] if errors else None
        raise ProjectError(
            f"flow {flow_id!r} does not compile: " + "; ".join(d.render() for d in errors[:5]),
            code=first.code if first else "E_UNKNOWN_FLOW",
            file=first.file if first else None,
            line=first.line if first else None,
            hint="run `aqven check` for every problem",
            details={"diagnostics": [d.model_dump() for d in errors]},
            http_status=422,
        )
    return flow
