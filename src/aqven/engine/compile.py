"""Compile a flow: resolve every node, check bindings, types, files and calls.

Compiling never runs anything. Problems become diagnostics with file:line; `compile_flow` raises one
`ProjectError` listing them when the flow cannot run.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aqven.engine.compiled import CompiledFlow, CompiledNode
from aqven.engine.template import placeholders
from aqven.engine.variant import FlowPatch
from aqven.errors import ProjectError
from aqven.project.bindings import Binding, BindingSyntaxError, bindings_in, is_binding, parse_binding
from aqven.project.diagnostics import Diagnostics
from aqven.project.loader import FlowSource, Project
from aqven.project.paths import inside, is_file, rel
from aqven.project.pycode import load_function
from aqven.project.schema import CallNode, CodeNode, GroupNode, HumanNode, LlmNode, Node
from aqven.project.types import ANY, TypeSpecError, compatible, describe, schema_at, to_json_schema
from aqven.project.yaml_source import PathKey

BINDING_HINT = "see docs/reference/bindings.md; a literal text that starts with $ is written with $$"


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
        self.diagnostics = Diagnostics()
        self._stack: list[str] = []
        self._done: dict[str, CompiledFlow | None] = {}
        self._errors = 0

    # ---- diagnostics ----

    def _err(self, code: str, message: str, where: tuple[str, int | None], hint: str = "") -> None:
        file, line = where
        self._errors += 1  # counted even when the same diagnostic is already listed
        # unique: a module that fails to import is named by every node that uses it
        self.diagnostics.add(code, message, file=file, line=line, hint=hint, unique=True)

    def _warn(self, code: str, message: str, where: tuple[str, int | None], hint: str = "") -> None:
        file, line = where
        self.diagnostics.warning(code, message, file=file, line=line, hint=hint)

    # ---- flows ----

    def find_flow(self, flow_id: str) -> FlowSource | None:
        return self.patch.local_flows.get(flow_id) or self.project.flows.get(flow_id)

    def compile(self, flow_id: str, *, where: tuple[str, int | None] | None = None) -> CompiledFlow | None:
        source = self.find_flow(flow_id)
        if source is None:
            if ("flow", flow_id) in self.project.failed:
                message = f"flow {flow_id!r} did not load"
                hint = f"fix the errors reported in {self.project.file_of('flow', flow_id)}"
            else:
                message = f"no flow {flow_id!r}"
                hint = f"flows: {', '.join(sorted(self.project.flows)) or 'none'}"
            self._err("E_UNKNOWN_FLOW", message, where or ("flows", None), hint=hint)
            return None
        top = not self._stack
        if flow_id in self._stack:
            chain = " -> ".join([*self._stack[self._stack.index(flow_id) :], flow_id])
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

    def _schema(self, spec: Any, where: _Where, key: str) -> dict[str, Any]:
        try:
            return to_json_schema(spec)
        except TypeSpecError as exc:
            self._err("E_TYPE_INVALID", str(exc), where.at(key, *exc.path), hint="see docs/reference/types.md")
            return dict(ANY)

    def _compile_source(self, source: FlowSource, patch: FlowPatch) -> CompiledFlow | None:
        spec = source.spec
        fw = _Where(self.project, source.doc.file, ())
        before = self._errors
        input_schema = self._schema(spec.input, fw, "input")
        output_schema = self._schema(spec.output, fw, "output")

        seen: dict[str, int | None] = {}
        for node, ypath in _spec_paths(spec.nodes, ("nodes",)):
            if node.id in seen:
                first = seen[node.id]
                self._err(
                    "E_DUPLICATE_NODE",
                    f"node id {node.id!r} is used again in flow {spec.id!r}"
                    + (f" (first at line {first})" if first else ""),
                    fw.at(*ypath, "id"),
                    hint="node ids are unique within a flow, group children included",
                )
            else:
                seen[node.id] = fw.at(*ypath, "id")[1]
        for target in [*patch.agents, *patch.prompts, *patch.nodes, *patch.flows]:
            if target not in seen:
                self._err(
                    "E_UNKNOWN_NODE",
                    f"the variant names node {target!r}, which flow {spec.id!r} lacks",
                    fw.at("nodes"),
                    hint="varies.nodes must name nodes of the subject flow",
                )

        nodes = [self._node(n, source, fw.child("nodes", i), patch) for i, n in enumerate(spec.nodes)]
        index: dict[str, CompiledNode] = {}
        for n in _walk(nodes):
            index.setdefault(n.id, n)  # a duplicate id is reported above; the first one stands
        scope_of: dict[str, str | None] = {}
        for n in nodes:
            scope_of.setdefault(n.id, None)
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
        if self._errors > before:
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
            scope_of.setdefault(child.id, node.id)
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
                if ("agent", agent_id) in self.project.failed:
                    message = f"node {spec.id!r} uses agent {agent_id!r}, which did not load"
                    hint = f"fix the errors reported in {self.project.file_of('agent', agent_id)}"
                else:
                    message = f"node {spec.id!r} uses agent {agent_id!r}, which does not exist"
                    hint = f"agents: {', '.join(sorted(self.project.agents)) or 'none'}"
                self._err("E_UNKNOWN_AGENT", message, where.at("agent"), hint=hint)
            prompt_path: Path | None
            if spec.id in patch.prompts:
                prompt_path = patch.prompts[spec.id]
            else:
                prompt_path = self._file(folder, spec.prompt, where.at("prompt"), "prompt")
            if prompt_path is not None:
                node.prompt_text = self._read_text(prompt_path, where.at("prompt"), "prompt")
                if node.prompt_text is not None:
                    node.prompt_file = rel(self.project.root, prompt_path)
                    unbound = sorted(set(placeholders(node.prompt_text)) - set(spec.inputs))
                    if unbound:
                        self._err(
                            "E_PROMPT_UNBOUND",
                            f"prompt {node.prompt_file} reads {', '.join(unbound)}, not among the node's inputs",
                            where.at("prompt"),
                            hint="add them to the node's inputs, or fix the placeholders",
                        )
            node.output_schema = self._schema(spec.output, where, "output")
        elif isinstance(spec, CodeNode):
            file_part, _, fn_name = spec.code.rpartition(":")
            path = self._file(folder, file_part, where.at("code"), "code")
            node.code_function = fn_name
            if path is not None:
                if not is_file(path):
                    self._err(
                        "E_FILE_MISSING",
                        f"code file {rel(self.project.root, path)!r} is missing",
                        where.at("code"),
                        hint="create the file or fix the path (relative to the flow)",
                    )
                else:
                    node.code_file = path
                    if self.load_code:
                        self._check_function(path, fn_name, spec.inputs, where)
            node.output_schema = self._schema(spec.output, where, "output")
        elif isinstance(spec, CallNode):
            flow_id = patch.flows.get(spec.id, spec.flow)
            node.called_id = flow_id
            node.called = self.compile(flow_id, where=where.at("flow"))
            if node.called is not None:
                node.output_schema = node.called.output_schema
        elif isinstance(spec, HumanNode):
            node.output_schema = self._schema(spec.output, where, "output")
        elif isinstance(spec, GroupNode):
            node.children = [self._node(c, source, where.child("nodes", i), patch) for i, c in enumerate(spec.nodes)]
            node.result = spec.result or (f"${spec.nodes[-1].id}.out" if spec.nodes else None)
            if spec.inputs:
                self._warn(
                    "W_GROUP_INPUTS",
                    f"group {spec.id!r} has inputs, but its children do not see them",
                    where.at("inputs"),
                    hint="remove the group's inputs; its children bind $input..., $context... or other nodes directly",
                )
            if not spec.nodes:
                self._err(
                    "E_EMPTY_GROUP",
                    f"group {spec.id!r} has no nodes",
                    where.at("nodes"),
                    hint="a group holds at least one node",
                )
        return node

    def _read_text(self, path: Path, where: tuple[str, int | None], what: str) -> str | None:
        name = rel(self.project.root, path)
        if not is_file(path):
            self._err(
                "E_FILE_MISSING",
                f"{what} file {name!r} is missing",
                where,
                hint="create the file or fix the path (relative to the flow)",
            )
            return None
        try:
            return path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            self._err("E_FILE_UNREADABLE", f"{what} file {name!r} is not UTF-8 text", where, "save it as UTF-8")
        except OSError as exc:
            self._err("E_FILE_UNREADABLE", f"cannot read {what} file {name!r}: {exc.strerror}", where, "check it")
        return None

    def _check_function(self, path: Path, fn_name: str, inputs: dict[str, Any], where: _Where) -> None:
        """Import the code node's function and check that it accepts the node's inputs as keywords."""
        try:
            fn = load_function(self.project.root, path, fn_name)
        except ProjectError as exc:
            at = (exc.file or where.file, exc.line) if exc.code == "E_CODE_IMPORT" else where.at("code")
            self._err(exc.code, exc.message, at, exc.hint)
            return
        problem = _signature_problem(fn, list(inputs))
        if problem:
            self._err(
                "E_CODE_SIGNATURE",
                f"{fn_name}() cannot take the node's inputs ({', '.join(inputs) or 'none'}): {problem}",
                where.at("inputs") if inputs else where.at("code"),
                hint="the function is called with the node's inputs as keyword arguments; make names agree",
            )

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
                    self._err("E_BINDING_SYNTAX", str(exc), nw.at("inputs", key), hint=BINDING_HINT)
                    continue
                for b in found:
                    self._check_binding(b, node, group, ctx, nw.at("inputs", key))
                    if b.source == "node" and b.node in ids and b.node != node.id:
                        node.deps.add(b.node)
            if isinstance(node.spec, CallNode):
                self._check_call_inputs(node, node.spec, ctx, nw)
            if node.children:
                self._check_scope(node.children, node.id, ctx, nw.child("nodes"))
                for b in _quiet_bindings(node):
                    if b.source == "node" and b.node in ids and b.node != node.id:
                        node.deps.add(b.node)
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
            self._err("E_BINDING_SYNTAX", str(exc), where, hint=BINDING_HINT)
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
        if b.node in _enclosing(group, ctx.scope_of):
            self._err(
                "E_BINDING_CYCLE",
                f"{text}: node {owner!r} is inside group {b.node!r}, whose output waits for it",
                where,
                hint="inside a group, read the group's inputs or other nodes, not the group itself",
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

    def _declared_input(self, flow_id: str) -> dict[str, Any] | None:
        """A flow's declared input type, also when the flow itself has other problems."""
        source = self.find_flow(flow_id)
        if source is None:
            return None
        try:
            return to_json_schema(source.spec.input)
        except TypeSpecError:
            return None  # reported where that flow is compiled

    def _check_call_inputs(self, node: CompiledNode, spec: CallNode, ctx: _Ctx, where: _Where) -> None:
        called_id = node.called_id or spec.flow
        target = node.called.input_schema if node.called else self._declared_input(called_id)
        if target is None:
            return
        types = _schema_types(target)
        if types and "object" not in types:
            self._err(
                "E_BINDING_TYPE",
                f"flow {called_id!r} takes {describe(target)}, but a call node passes its inputs as an object",
                where.at("flow"),
                hint="give the called flow an object input, e.g. input: {text: string}",
            )
            return
        props = target.get("properties")
        props = props if isinstance(props, dict) else {}
        required = target.get("required")
        if "object" in types:
            for name in required if isinstance(required, list) else []:
                if name not in node.inputs:
                    self._err(
                        "E_BINDING_TYPE",
                        f"call node {node.id!r} does not give input {name!r} that flow {called_id!r} needs",
                        where.at("inputs"),
                        hint=f"flow {called_id!r} takes {describe(target)}",
                    )
            for name, value in node.inputs.items():
                if props and name not in props and target.get("additionalProperties") in (None, False):
                    self._err(
                        "E_BINDING_TYPE",
                        f"flow {called_id!r} has no input {name!r}",
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
                        f"but flow {called_id!r} wants {describe(props[name])}",
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
        if len(deps) < len(nodes):
            return  # duplicate ids (reported already) make the wait graph meaningless
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


def _spec_paths(nodes: list[Node], path: PathKey) -> Iterator[tuple[Node, PathKey]]:
    """Every node spec with its path in the flow file, group children included."""
    for i, node in enumerate(nodes):
        yield node, (*path, i)
        if isinstance(node, GroupNode):
            yield from _spec_paths(node.nodes, (*path, i, "nodes"))


def _signature_problem(fn: Callable[..., Any], names: list[str]) -> str | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(**dict.fromkeys(names))
    except TypeError as exc:
        return str(exc)
    return None


def _quiet_bindings(node: CompiledNode) -> list[Binding]:
    """The bindings a node, its descendants and their results read; malformed ones are skipped (reported elsewhere)."""
    found: list[Binding] = []
    for n in [node, *_walk(node.children)]:
        for value in [*n.inputs.values(), n.result]:
            with contextlib.suppress(BindingSyntaxError):
                found.extend(bindings_in(value))
    return found


def _enclosing(group: str | None, scope_of: dict[str, str | None]) -> list[str]:
    """`group` and the groups around it."""
    out: list[str] = []
    while group is not None and group not in out:
        out.append(group)
        group = scope_of.get(group)
    return out


def _schema_types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    return {x for x in t if isinstance(x, str)} if isinstance(t, list) else set()


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
