"""The OpenAI chat model with a local server's request shapes (`aqven.project.local_servers`).

pydantic-ai asks for `native` output with ``response_format: {"type": "json_schema", ...}`` and forces the one
output tool of `tool` mode with ``tool_choice: "required"``. llama.cpp's servers read other shapes: both
`llama-server` and `llama-cpp-python[server]` take the schema as ``{"type": "json_object", "schema": ...}``, and
`llama-cpp-python` forces a tool call only for a named ``tool_choice`` (it ignores ``"required"``). A server's
profile says which shape it reads; this model sends that one and nothing else changes.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.profiles import ModelProfileSpec
from pydantic_ai.providers import Provider

from aqven.project.local_servers import LocalServer


class LocalChatModel(OpenAIChatModel):
    """`OpenAIChatModel` whose native-output and tool-forcing fields follow `server`'s profile."""

    def __init__(self, name: str, *, provider: Provider[Any], profile: ModelProfileSpec, server: LocalServer) -> None:
        super().__init__(name, provider=provider, profile=profile)
        self.server = server

    def _map_json_schema(self, o: Any) -> Any:
        if self.server.native_format == "json_object":
            # llama.cpp turns the schema into a grammar; `json_schema` is refused (500) by llama-cpp-python.
            return {"type": "json_object", "schema": o.json_schema}
        return super()._map_json_schema(o)

    def _get_tool_choice(
        self, model_settings: OpenAIChatModelSettings, model_request_parameters: ModelRequestParameters
    ) -> tuple[list[Any], Any]:
        tools, choice = super()._get_tool_choice(model_settings, model_request_parameters)
        if self.server.tool_choice == "named" and choice == "required" and len(tools) == 1:
            # One tool to call (the output tool): name it, the one form such a server forces.
            choice = {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
        return cast(list[Any], tools), choice
