"""How a tool is declared: a typed async function over the project service, registered with a title and an effect.

A tool's name and description are its function's; its input model is built from the parameters after the first
(the `ProjectService`), with their `Field` constraints and descriptions; its output model is the return
annotation. `aqven.server.tools` declares every tool in one `Registry`; the MCP server
(`aqven.server.mcp_server`) and the Studio chat (`aqven.server.chat`) both serve that registry, so every agent
sees the same tools under the same names with the same rules.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from aqven.server.service import ProjectService

Effect = Literal["read", "spends", "destroys"]  # reads only · calls models (costs money) · ends something for good
ToolFn = Callable[..., Awaitable[BaseModel]]


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def validation_problem(exc: ValidationError) -> dict[str, Any]:
    """Arguments that break a tool's input schema, as an error with the stable code VALIDATION_ERROR."""
    problems = [{"loc": [str(p) for p in e.get("loc", ())], "message": e.get("msg", "")} for e in exc.errors()]
    first = problems[0] if problems else {"loc": [], "message": "invalid arguments"}
    where = ".".join(first["loc"])
    return {
        "code": "VALIDATION_ERROR",
        "message": f"{where}: {first['message']}" if where else str(first["message"]),
        "hint": "see the tool's input schema",
        "details": {"problems": problems},
    }


@dataclass(frozen=True)
class ToolSpec:
    """One tool: everything the MCP server and the chat agent need to offer and call it."""

    name: str
    title: str
    description: str
    effect: Effect
    fn: ToolFn
    signature: inspect.Signature  # the arguments an agent gives (the service parameter removed)
    args_model: type[ToolArgs]
    output: type[BaseModel]

    async def call(self, svc: ProjectService, args: dict[str, Any]) -> BaseModel:
        """Validate `args` against the input model (ValidationError when they break it) and run the tool."""
        validated = self.args_model.model_validate(args)
        return await self.fn(svc, **{name: getattr(validated, name) for name in self.signature.parameters})


def _spec(fn: ToolFn, title: str, effect: Effect) -> ToolSpec:
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())[1:]  # the first one is the ProjectService
    sig = inspect.Signature(
        [p.replace(annotation=hints[p.name], kind=inspect.Parameter.KEYWORD_ONLY) for p in params],
        return_annotation=hints["return"],
    )
    fields: dict[str, Any] = {
        p.name: (p.annotation, p.default) if p.default is not inspect.Parameter.empty else p.annotation
        for p in sig.parameters.values()
    }
    args_model = create_model(f"{fn.__name__}_args", __base__=ToolArgs, **fields)
    return ToolSpec(
        name=fn.__name__,
        title=title,
        description=inspect.cleandoc(fn.__doc__ or ""),  # the text an agent reads, without indentation
        effect=effect,
        fn=fn,
        signature=sig,
        args_model=args_model,
        output=hints["return"],
    )


class Registry:
    """The tools, in the order they are declared (the order an agent lists them in)."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}

    def tool(self, title: str, effect: Effect = "read") -> Callable[[ToolFn], ToolFn]:
        """Register the decorated function as a tool (its name, docstring, parameters and return type)."""

        def register(fn: ToolFn) -> ToolFn:
            spec = _spec(fn, title, effect)
            if spec.name in self._tools:
                raise ValueError(f"tool {spec.name!r} is declared twice")
            self._tools[spec.name] = spec
            return fn

        return register

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)
