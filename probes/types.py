"""Shared data of the canary: what discovery returns, what a pinned request
produced, and what a contract concluded. Plain pydantic models, no I/O.

    Endpoint    one provider endpoint of a model (from the endpoints listing)
    Transcript  what one pinned streaming request produced, byte-faithful facts
    ToolCall    one tool call of a reply, assembled from its deltas
    Outcome     one contract's verdict on one or more transcripts

Every other folder (quarantine, flows, routing) reads these; nothing here
imports anything else of ours.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from wire.errors import ErrorInfo
from wire.transport import TransportCode


class Contract(StrEnum):
    """The narrow, code-checkable contracts a probe set covers (SPEC C3-C12)."""

    LATENCY = "latency"  # C3
    REFUSAL = "refusal"  # C4 (+ C5 positive controls)
    STRUCTURED = "structured"  # C6
    LANGUAGE = "language"  # C7 (+ C8 confirmation)
    START = "start"  # C9 response start, repetition, encoding, decoding; C11 reasoning leaks
    TOOLS = "tools"  # C10 tool calls
    STREAM = "stream"  # C12 honest streams: buffered, output speed, the model served


class OutcomeStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"  # quality evidence against the endpoint
    INCONCLUSIVE = "inconclusive"  # could not judge (short/ambiguous text)
    TRANSPORT = "transport"  # unreachable / rate limited / cut: never a quality failure
    UNSUPPORTED = "unsupported"  # endpoint does not advertise what the contract needs
    MISROUTED = "misrouted"  # served by another provider than the one pinned


class Pricing(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt: float = 0.0  # USD per token
    completion: float = 0.0
    request: float = 0.0
    image: float = 0.0


class Endpoint(BaseModel):
    """One provider endpoint of a model, as listed by `/models/{id}/endpoints`."""

    model_config = ConfigDict(frozen=True)

    model_id: str
    tag: str  # slug for provider.only / ignore, e.g. "deepinfra/fp8"
    provider_name: str  # what responses carry in their `provider` field
    name: str = ""
    quantization: str | None = None
    status: int = 0  # 0 normal; negative = degraded (kept, never dropped)
    context_length: int | None = None
    max_completion_tokens: int | None = None
    max_prompt_tokens: int | None = None
    supported_parameters: tuple[str, ...] = ()
    pricing: Pricing = Field(default_factory=Pricing)
    uptime_last_30m: float | None = None
    latency_p50_ms: float | None = None  # `latency_last_30m.p50`: milliseconds to first token
    throughput_p50_tps: float | None = None  # the listing's `throughput_last_30m.p50`
    # the `tool_choice` values that passed OpenRouter's testing (`supports_tool_choice`);
    # None when the listing does not say
    tool_choices: tuple[str, ...] | None = None

    @property
    def supports_structured_output(self) -> bool:
        params = set(self.supported_parameters)
        return "response_format" in params or "structured_outputs" in params

    @property
    def supports_tools(self) -> bool:
        return "tools" in self.supported_parameters

    def supports_tool_choice(self, choice: str) -> bool:
        """`choice` (auto, none, required, function) is usable: listed as passing, or the
        listing says nothing about tool_choice."""
        return self.tool_choices is None or choice in self.tool_choices

    @property
    def usable(self) -> bool:
        """Status 0 is normal; negative statuses are degraded (still probed)."""
        return self.status >= 0


class ToolCall(BaseModel):
    """One tool call of a reply: a non-streamed `message.tool_calls` entry, or the deltas
    of one `index` assembled (`arguments` is the concatenated JSON text, unparsed)."""

    index: int | None = None
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class Transcript(BaseModel):
    """What one pinned request produced. Facts only; verdicts live in Outcome.

    `probe` names the request within its contract (the tool probes' `required`, `none`,
    `auto_need`, `auto_plain`, `result`); chunk times are monotonic seconds from send."""

    request_id: str
    model_id: str
    tag: str  # the endpoint pinned
    pinned_provider: str  # its provider_name
    contract: Contract
    locale: str | None = None
    probe: str | None = None  # which request of the contract (tool probes)
    expect: str | None = None  # the function a required call must name / the value to use
    reasoning_disabled: bool = False  # the request asked for no reasoning
    served_by: str | None = None  # the response's `provider` field
    served_model: str | None = None  # the response's `model` field (first chunk naming one)
    http_status: int | None = None
    error: ErrorInfo | None = None
    transport_error: TransportCode | None = None  # wire.transport: what cut us off, if anything
    ttft_s: float | None = None  # first *content* delta, monotonic, from send
    total_s: float | None = None
    gave_up_waiting: bool = False  # no text within the latency threshold
    text: str = ""
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    done: bool = False  # saw `data: [DONE]`
    bytes_received: int = 0
    byte_limit_hit: bool = False
    time_limit_hit: bool = False
    malformed_lines: int = 0  # SSE data lines that were not valid JSON
    non_utf8_lines: int = 0  # SSE lines that were not valid UTF-8 (decoded with U+FFFD)
    keepalives: int = 0  # SSE comment lines (keep-alives) seen; never tokens
    generation_id: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_delta_problems: list[str] = Field(default_factory=list)  # deltas that did not fit
    first_tool_s: float | None = None  # first tool-call delta
    reasoning_chars: int = 0  # text in `delta.reasoning` / `reasoning_details`: never content
    first_reasoning_s: float | None = None
    last_content_s: float | None = None  # last non-empty content delta
    content_chunks: int = 0  # non-empty content deltas
    first_chunk_chars: int = 0  # characters of the first content delta
    headers_s: float | None = None  # the reply's headers arrived (the stream was open)
    # the last read before the first output that brought none (keep-alives, headers): the
    # client was listening then, so a silence after it is the server's (C12)
    idle_read_s: float | None = None

    @property
    def first_token_s(self) -> float | None:
        """The first output of any kind (content, reasoning, a tool call): what a user sees
        start streaming (C3)."""
        times = [
            s for s in (self.ttft_s, self.first_reasoning_s, self.first_tool_s) if s is not None
        ]
        return min(times) if times else None

    @property
    def misrouted(self) -> bool:
        return self.served_by is not None and self.served_by != self.pinned_provider

    @property
    def provider_unverified(self) -> bool:
        """A 200 with content that never named its provider: who served it is unknown (C2)."""
        return self.http_status == 200 and self.served_by is None and bool(self.text.strip())


class Outcome(BaseModel):
    """One contract's verdict. `reason` is a short machine-readable code."""

    model_config = ConfigDict(frozen=True)

    contract: Contract
    status: OutcomeStatus
    reason: str
    tag: str | None = None
    locale: str | None = None
    ttft_s: float | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)  # numbers, short excerpts; never keys

    @property
    def is_failure(self) -> bool:
        return self.status is OutcomeStatus.FAIL
