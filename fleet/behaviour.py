"""What one endpoint does with one request: a `Plan` (pre-token error, or the
content to stream with its timing, finish reason and tail), decided from the
endpoint's scripted faults and defects with its seeded RNG.

Determinism: each endpoint owns a `random.Random` seeded from the scenario
seed, model id and tag; every request routed to it draws one 64-bit sub-seed
from it, so the same request sequence gives the same responses."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from fleet import bank, defects, schema_gen
from fleet.language import detect_locale
from fleet.request import ChatRequest, last_user_text, prompt_tokens
from fleet.scenario import EndpointSpec, ModelSpec, Scenario
from fleet.selection import supports


@dataclass(frozen=True)
class PreError:
    """An error returned before the first token (HTTP status + envelope), or a reset."""

    status: int
    message: str
    error_type: str
    retry_after_s: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    reset: bool = False


@dataclass
class Plan:
    endpoint: EndpointSpec
    served_as: str
    locale: str
    prompt_tokens: int
    delay_s: float = 0.0
    pre_error: PreError | None = None
    chunks: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str = "stop"
    gap_s: float = 0.0
    tail: str = "done"  # done | cut | midstream_error
    tail_at: int = 0
    midstream_error: dict[str, Any] | None = None
    fault: str | None = None
    defect: str | None = None

    @property
    def content(self) -> str:
        return "".join(self.chunks)

    @property
    def completion_tokens(self) -> int:
        if self.tool_calls:
            return sum(
                bank.estimate_tokens(c["function"]["arguments"]) + 4 for c in self.tool_calls
            )
        return len(self.chunks)

    def cost(self, images: int = 0) -> float:
        p = self.endpoint.pricing
        return round(
            self.prompt_tokens * float(p.prompt)
            + self.completion_tokens * float(p.completion)
            + float(p.request)
            + images * float(p.image),
            12,
        )


class EndpointState:
    """Per-endpoint RNG and request counter (reset when the scenario changes)."""

    def __init__(self, seed: int, model_id: str, tag: str) -> None:
        self.rng = random.Random(f"{seed}|{model_id}|{tag}")
        self.count = 0

    def next_request(self) -> tuple[int, random.Random]:
        n = self.count
        self.count += 1
        return n, random.Random(self.rng.getrandbits(64))


def _pick(items: list[Any], n: int, rng: random.Random) -> Any | None:
    """first_n items win while n < first_n; otherwise one uniform draw over the rates."""
    for item in items:
        if item.first_n is not None and n < item.first_n:
            return item
    u = rng.random()
    acc = 0.0
    for item in items:
        if item.rate is not None:
            acc += item.rate
            if u < acc:
                return item
    return None


def _jitter(value: float, jitter: float, rng: random.Random) -> float:
    return max(0.0, value * (1.0 + rng.uniform(-jitter, jitter)))


def _tool_choice_name(req: ChatRequest) -> str | None:
    choice = req.tool_choice
    if isinstance(choice, dict):
        fn = choice.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return fn["name"]
    return None


def _tool_calls(req: ChatRequest, defect: str | None, rng: random.Random) -> list[dict[str, Any]]:
    assert req.tools
    wanted = _tool_choice_name(req)
    tool = next((t for t in req.tools if t.function.name == wanted), req.tools[0])
    schema = tool.function.parameters
    args = schema_gen.generate(schema, rng)
    name = tool.function.name
    if defect == "tool_unknown_name":
        name = f"{name}_v2"
    arguments = json.dumps(args if args is not None else {}, ensure_ascii=False)
    if defect == "tool_bad_args":
        arguments = schema_gen.bad_arguments(args, schema, rng)
    call_id = "call_" + uuid.UUID(int=rng.getrandbits(128)).hex[:24]
    return [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]


_TEXT_DEFECTS = {
    "stray_start",
    "start_prefix",
    "first_token_drop",
    "language_mix",
    "language_switch",
    "mojibake",
    "replacement_chars",
    "repetition",
    "truncation",
}


def plan_request(
    scenario: Scenario,
    model: ModelSpec,
    endpoint: EndpointSpec,
    state: EndpointState,
    req: ChatRequest,
) -> Plan:
    """Decide what `endpoint` does with `req` (advances the endpoint's RNG once)."""
    n, rng = state.next_request()
    scale = scenario.time_scale
    locale = detect_locale(last_user_text(req))
    plan = Plan(endpoint, endpoint.provider_name, locale, prompt_tokens(req, scenario.image_tokens))
    fault = _pick(endpoint.faults, n, rng)
    defect = _pick(endpoint.defects, n, rng)
    timing = endpoint.timing
    plan.delay_s = _jitter(timing.ttft_s, timing.jitter, rng) * scale
    plan.gap_s = scale / timing.tokens_per_s
    if fault is not None:
        plan.fault = fault.kind
        if fault.kind == "http_error":
            plan.delay_s *= 0.5
            plan.pre_error = _http_fault(fault.status, fault.retry_after_s)
            return plan
        if fault.kind == "reset":
            plan.delay_s *= 0.5
            plan.pre_error = PreError(502, "connection reset", "provider_unavailable", reset=True)
            return plan
        if fault.kind == "slow_first_token":
            plan.delay_s = _jitter(fault.ttft_s, 0.02, rng) * scale
        if fault.kind == "misroute":
            plan.served_as = fault.serve_as

    uses_tools = bool(req.tools) and supports(endpoint, "tools") and req.tool_choice != "none"
    schema = req.json_schema if supports(endpoint, "response_format") else None
    wants_object = req.response_format is not None and req.response_format.type == "json_object"
    kind = defect.kind if defect is not None else None

    if kind == "policy_filter":
        assert defect is not None
        mode = rng.choice(defect.modes)
        plan.defect = f"policy_filter:{mode}"
        if mode == "moderation_403":
            plan.pre_error = PreError(
                403,
                f'{model.id} requires moderation on {endpoint.provider_name}. Your input was flagged for "violence".',
                "permission_denied",
                metadata={
                    "reasons": ["violence"],
                    "flagged_input": last_user_text(req)[:100],
                    "provider_name": endpoint.provider_name,
                    "model_slug": model.id,
                },
            )
            return plan
        text = bank.refusal(locale, rng) if mode == "refusal" else ""
        if mode == "content_filter_cut":
            text = defects.truncate(bank.compose_reply(locale, rng), 0.3)
        plan.chunks = bank.chunk_text(text, locale)
        plan.finish_reason = "content_filter" if mode.startswith("content_filter") else "stop"
    elif uses_tools:
        tool_defect = kind if kind in {"tool_unknown_name", "tool_bad_args"} else None
        plan.defect = tool_defect
        plan.tool_calls = _tool_calls(req, tool_defect, rng)
        plan.finish_reason = "tool_calls"
    elif schema is not None or wants_object:
        schema = (
            schema
            if schema is not None
            else {"type": "object", "properties": {"reply": {"type": "string"}}}
        )
        instance = schema_gen.generate(schema, rng)
        if kind == "schema_break" and schema is not None and req.json_schema is not None:
            assert defect is not None
            mode = rng.choice(defect.modes)
            plan.defect = f"schema_break:{mode}"
            text = schema_gen.break_instance(instance, schema, mode, rng)
        else:
            text = json.dumps(instance, ensure_ascii=False)
        plan.chunks = bank.chunk_text(text)
    else:
        text = _text_reply(defect, locale, rng, plan)
        plan.chunks = bank.chunk_text(text, locale)

    stops = [req.stop] if isinstance(req.stop, str) else (req.stop or [])
    hits = [i for i in (plan.content.find(s) for s in stops if s) if i >= 0]
    if hits and not plan.tool_calls:
        plan.chunks = bank.chunk_text(plan.content[: min(hits)], locale)
        plan.finish_reason = "stop"
    limit = req.token_limit
    if limit is not None and not plan.tool_calls and len(plan.chunks) > limit:
        plan.chunks = plan.chunks[:limit]
        plan.finish_reason = "length"
    if fault is not None and fault.kind in {"stream_cut", "midstream_error"}:
        plan.tail = "cut" if fault.kind == "stream_cut" else "midstream_error"
        plan.tail_at = max(1, int(len(plan.chunks) * fault.after_fraction))
        if fault.kind == "midstream_error":
            plan.midstream_error = {
                "code": fault.code,
                "message": "Provider returned error",
                "metadata": {
                    "error_type": fault.error_type,
                    "provider_name": endpoint.provider_name,
                },
            }
    return plan


def _text_reply(defect: Any, locale: str, rng: random.Random, plan: Plan) -> str:
    kind = defect.kind if defect is not None and defect.kind in _TEXT_DEFECTS else None
    if kind == "language_mix" and locale == defect.source:
        plan.defect = "language_mix"
        return defects.language_mix(defect.source, defect.intruder, rng, defect.sentence_share)
    if kind == "language_switch":
        plan.defect = "language_switch"
        return bank.compose_reply(defect.to if locale != defect.to else defect.alt, rng)
    if kind == "repetition":
        plan.defect = "repetition"
        plan.finish_reason = "length"
        return defects.repetition(locale, rng, defect.repeats)
    text = bank.compose_reply(locale, rng)
    if kind == "stray_start":
        plan.defect = "stray_start"
        return defects.stray_start(text, rng)
    if kind == "start_prefix":
        plan.defect = "start_prefix"
        return defect.prefix + text
    if kind == "first_token_drop":
        plan.defect = "first_token_drop"
        return "".join(bank.chunk_text(text, locale)[1:])
    if kind == "mojibake":
        codec = rng.choice(defect.codecs)
        plan.defect = f"mojibake:{codec}"
        return defects.mojibake(text, codec)
    if kind == "replacement_chars":
        plan.defect = "replacement_chars"
        return defects.replacement_chars(text, rng, defect.count)
    if kind == "truncation":
        plan.defect = "truncation"
        plan.finish_reason = "length"
        return defects.truncate(text, defect.keep_fraction)
    return text


_HTTP_FAULTS: dict[int, tuple[str, str]] = {
    408: ("Request timed out upstream", "timeout"),
    429: ("Rate limit exceeded: too many requests to this provider", "rate_limit_exceeded"),
    500: ("Internal server error", "server"),
    502: ("Provider returned error", "provider_unavailable"),
    503: ("Provider is overloaded", "provider_overloaded"),
    504: ("Upstream timed out", "timeout"),
}


def _http_fault(status: int, retry_after_s: float | None) -> PreError:
    message, error_type = _HTTP_FAULTS[status]
    return PreError(status, message, error_type, retry_after_s=retry_after_s)
