"""The chat-completions request body as the fleet understands it: validation
with field-naming errors, the last user message's text, image parts and a
prompt-token estimate."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleet.bank import estimate_tokens
from fleet.schema_check import SchemaProblem, check_schema
from fleet.selection import ProviderPrefs
from ground.errors import CanaryError


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class FunctionDef(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Tool(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["function"] = "function"
    function: FunctionDef


class JsonSchemaSpec(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = "response"
    strict: bool | None = None
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaSpec | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    response_format: ResponseFormat | None = None
    tools: list[Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    provider: ProviderPrefs | None = None
    stream_options: StreamOptions | None = None
    reasoning: Any = None
    include_reasoning: Any = None
    reasoning_effort: Any = None

    @property
    def token_limit(self) -> int | None:
        return self.max_tokens or self.max_completion_tokens

    @property
    def reasoning_wanted(self) -> str:
        """`on` (default), `hidden` (reasoning happens, tokens counted, nothing sent:
        `reasoning.exclude` or `include_reasoning: false`) or `off` (`reasoning.enabled:
        false`, effort `none`, `max_tokens: 0`)."""
        r = self.reasoning if isinstance(self.reasoning, dict) else {}
        if (
            r.get("enabled") is False
            or r.get("effort") == "none"
            or r.get("max_tokens") == 0
            or self.reasoning_effort == "none"
        ):
            return "off"
        if r.get("exclude") is True or self.include_reasoning is False:
            return "hidden"
        return "on"

    @property
    def json_schema(self) -> dict[str, Any] | None:
        rf = self.response_format
        if rf is not None and rf.type == "json_schema":
            return rf.json_schema.schema_ if rf.json_schema is not None else {}
        return None


class RequestError(CanaryError, ValueError):
    """A request body the fleet rejects with HTTP 400 (message names the field)."""


def parse_request(data: Any) -> ChatRequest:
    if not isinstance(data, dict):
        raise RequestError(f"request body must be a JSON object, got {type(data).__name__}")
    try:
        req = ChatRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise RequestError(f"invalid request: {field}: {first['msg']}{more}") from None
    try:
        if req.json_schema is not None:
            check_schema(req.json_schema, "response_format.json_schema.schema")
        for i, tool in enumerate(req.tools or []):
            check_schema(tool.function.parameters, f"tools.{i}.function.parameters")
    except SchemaProblem as exc:
        raise RequestError(f"invalid request: {exc}") from None
    return req


def _parts(content: str | list[dict[str, Any]] | None) -> tuple[str, int]:
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts, images = [], 0
    for part in content:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in {"image_url", "input_image", "image"}:
            images += 1
    return "\n".join(texts), images


def message_text(message: Message) -> str:
    """The text of one message (its text parts joined by newlines)."""
    return _parts(message.content)[0]


def last_user_text(req: ChatRequest) -> str:
    for message in reversed(req.messages):
        if message.role == "user":
            return _parts(message.content)[0]
    return ""


def count_images(req: ChatRequest) -> int:
    return sum(_parts(m.content)[1] for m in req.messages)


def prompt_tokens(req: ChatRequest, image_tokens: int) -> int:
    """chars/4 over all message texts (+ tool definitions) + `image_tokens` per image."""
    total = 0
    for message in req.messages:
        text, images = _parts(message.content)
        total += estimate_tokens(text) + 4 + images * image_tokens
    if req.tools:
        total += sum(estimate_tokens(t.model_dump_json()) for t in req.tools)
    return total
