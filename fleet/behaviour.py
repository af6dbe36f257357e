"""What one endpoint does with one request: a `Plan` (pre-token error, or the
content to stream with its timing, finish reason and tail), decided from the
endpoint's scripted faults and defects with its seeded RNG.

Determinism: each endpoint owns a `random.Random` seeded from the scenario
seed, model id and tag; every request routed to it draws one 64-bit sub-seed
from it, so the same request sequence gives the same responses.

Tool calls (only on an endpoint whose `supported_parameters` include `tools`; any other
ignores `tools` and answers as without them). The fleet works with whatever functions
the request defines; arguments are generated valid against each function's
`parameters` schema (`fleet/schema_gen.py`: required fields, enums, nested objects,
arrays, `$ref`). A healthy endpoint calls a function (one call, `finish_reason:
"tool_calls"`; non-streamed `message.tool_calls` with `content: null`) when a call is
due, by this rule (`fleet/tools.py::turn`; an endpoint with `parallel_tool_calls: N` makes
the due call N times in the reply, indices 0..N-1, each with its own id and arguments):

- `tool_choice: "none"`: never, the reply is text;
- `{"type": "function", "function": {"name": N}}`: always, to N (the first tool when N
  is not among the request's tools);
- `"required"`: always, to the function the last user message names, else the first;
- `"auto"` (or absent): only when the LAST USER MESSAGE NAMES A FUNCTION: its exact name
  as a whole identifier (`get_weather`; case-sensitive), or else the last word of a name
  (`weather` of `get_weather` / `getWeather`; three letters at least, case-insensitive,
  a whole word not touching a letter, digit or `_`, plural `s` allowed); the function
  named earliest in the text wins. A message that names none is answered in text. Probe
  prompts in any locale can name the function's identifier literally; a prompt meant to
  need no tool must contain neither an identifier nor a name's last word.
- A conversation ending with `tool` messages (the results after the assistant's call)
  is answered in text quoting every scalar value of the results (a JSON result: its
  strings, numbers and booleans, at most eight; another result: its text), in the
  language of the last user message; unless `tool_choice` forces another call.

Healthy reasoning (`reasoning: stream` on the endpoint): a few reasoning tokens in
`delta.reasoning` and `delta.reasoning_details` (`[{"type": "reasoning.text", "text",
"format": "unknown", "index": 0}]`, with `"content": ""`) before the first content
token (non-streamed: `message.reasoning` / `reasoning_details`), counted in
`usage.completion_tokens` and in `usage.completion_tokens_details.reasoning_tokens`.
A request with `reasoning: {"enabled": false}` (or effort `none`) gets none;
`reasoning: {"exclude": true}` gets the tokens counted but nothing sent.

Which defect applies where: the call defects (`tool_as_text`, `tool_bad_args`,
`tool_schema_violation`, `tool_unknown_name`, `tools_ignored`) when a call is due;
`tool_choice_none_violated` when `tool_choice` is `none`; `tool_result_ignored` when
the conversation ends with tool results; `reasoning_leak`, `bpe_markers`,
`literal_escapes` on any text reply (not on structured output or calls);
`buffered_stream`, `slow_output`, `substituted_model` on every reply that is not an
error. A drawn defect that does not apply leaves the reply healthy (and unlabelled in
the request log's `defect`).

A conversation that ends with an assistant message (a prefill) is continued by the
endpoint's `prefill` mode: `continue` answers with bank sentences the prefill does not hold,
`repeat` sends the prefill again before them, `reject` answers 400 (the request log's entry
has the planned reply as `continuation`)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from fleet import bank, defects, schema_gen, tools
from fleet.language import detect_locale
from fleet.request import ChatRequest, last_user_text, message_text, prompt_tokens
from fleet.scenario import EndpointSpec, ModelSpec, OpenAIErrorFault, Scenario
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
    body: dict[str, Any] | None = None  # the whole error body, in another dialect than ours


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
    tail: str = "done"  # done | cut | midstream_error | no_done (all of it but [DONE])
    tail_at: int = 0
    garbage_at: int | None = None  # content chunks before `garbage_n` non-JSON data events
    garbage_n: int = 0
    stall_at: int | None = None  # content chunks before a silence of `stall_s`
    stall_s: float = 0.0
    midstream_error: dict[str, Any] | None = None
    fault: str | None = None
    defect: str | None = None
    reasoning: list[str] = field(default_factory=list)  # healthy reasoning stream tokens
    reasoning_hidden: bool = False  # reasoning happened (tokens counted) but is not sent
    buffered: bool = False  # everything in one chunk after a silent hold
    send_usage: bool = True  # a stream ends with the usage chunk (EndpointSpec.usage)
    served_model: str | None = None  # the `model` the reply names (None: the one requested)
    prefill: str | None = None  # the assistant message the conversation ended with

    @property
    def content(self) -> str:
        return "".join(self.chunks)

    @property
    def completion_tokens(self) -> int:
        """Output tokens, reasoning tokens included (as OpenRouter counts them)."""
        if self.tool_calls:
            return self.reasoning_tokens + sum(
                bank.estimate_tokens(c["function"]["arguments"]) + 4 for c in self.tool_calls
            )
        return self.reasoning_tokens + len(self.chunks)

    @property
    def reasoning_tokens(self) -> int:
        return len(self.reasoning)

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
    asked = req.stream_options is not None and req.stream_options.include_usage is True
    plan.send_usage = endpoint.usage == "always" or asked
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
        if fault.kind == "openai_error":
            plan.delay_s *= 0.5
            plan.pre_error = _openai_fault(fault)
            return plan
        if fault.kind == "reset":
            plan.delay_s *= 0.5
            plan.pre_error = PreError(502, "connection reset", "provider_unavailable", reset=True)
            return plan
        if fault.kind == "slow_first_token":
            plan.delay_s = _jitter(fault.ttft_s, 0.02, rng) * scale
        if fault.kind == "misroute":
            plan.served_as = fault.serve_as
    plan.prefill = prefill_of(req)
    if plan.prefill is not None and endpoint.prefill == "reject":
        plan.delay_s *= 0.5
        plan.pre_error = PreError(
            400, "This endpoint does not support assistant message prefill", "invalid_request"
        )
        return plan

    tool_turn = tools.turn(req) if req.tools and supports(endpoint, "tools") else None
    schema = req.json_schema if supports(endpoint, "response_format") else None
    wants_object = req.response_format is not None and req.response_format.type == "json_object"
    kind = defect.kind if defect is not None else None

    if kind == "policy_filter":
        assert defect is not None
        if _policy_filter(plan, model, endpoint, req, defect, rng):
            return plan
    elif tool_turn is not None and _tool_reply(plan, tool_turn, defect, rng):
        pass
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
        if plan.prefill is not None:
            text = _continued(plan.prefill, endpoint.prefill == "repeat", locale, rng)
        _set_text(plan, text, defect, rng)

    stops = [req.stop] if isinstance(req.stop, str) else (req.stop or [])
    hits = [i for i in (plan.content.find(s) for s in stops if s) if i >= 0]
    if hits and not plan.tool_calls:
        plan.chunks = bank.chunk_text(plan.content[: min(hits)], locale)
        plan.finish_reason = "stop"
    limit = req.token_limit
    if limit is not None and not plan.tool_calls and len(plan.chunks) > limit:
        plan.chunks = plan.chunks[:limit]
        plan.finish_reason = "length"
    _stream_defect(plan, defect, req, scale, rng)
    if fault is not None:
        _wire_fault(plan, fault, scale)
    if fault is not None and fault.kind in {"stream_cut", "midstream_error"}:
        plan.tail = "cut" if fault.kind == "stream_cut" else "midstream_error"
        plan.tail_at = max(1, int(len(plan.chunks) * fault.after_fraction))
        if fault.kind == "stream_cut" and fault.after_chunks is not None:
            plan.tail_at = fault.after_chunks
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


def prefill_of(req: ChatRequest) -> str | None:
    """The text of the assistant message a conversation ends with (a prefill to continue),
    or None (it ends otherwise, or the message is a tool call)."""
    last = req.messages[-1]
    if last.role != "assistant" or getattr(last, "tool_calls", None):
        return None
    text = message_text(last)
    return text or None


def _continued(prefill: str, repeat: bool, locale: str, rng: random.Random) -> str:
    """The reply to a prefilled conversation: sentences of the bank the prefill does not
    hold, after it (a space first when the prefill does not end in one); `repeat`: the
    prefill again before them (an endpoint that does not keep the prefill's place)."""
    fresh = [s for s in bank.compose_sentences(locale, rng) if s not in prefill]
    rest = bank.join(locale, fresh or bank.compose_sentences(locale, rng, 1))
    if not prefill[-1].isspace() and bank.bank(locale).joiner:
        rest = " " + rest
    return prefill + rest if repeat else rest


def _wire_fault(plan: Plan, fault: Any, scale: float) -> None:
    """The faults of a reply's wire that leave its content whole: no `[DONE]`, non-JSON
    data events in the middle, a stall after some chunks."""
    last = max(1, len(plan.chunks) - 1)  # before the last chunk (it carries the finish)
    if fault.kind == "no_done":
        plan.tail = "no_done"
    elif fault.kind == "malformed_event":
        plan.garbage_at = min(last, max(1, int(len(plan.chunks) * fault.after_fraction)))
        plan.garbage_n = fault.count
    elif fault.kind == "stall":
        plan.stall_at = min(last, fault.after_chunks)
        plan.stall_s = fault.stall_s * scale


def _policy_filter(
    plan: Plan,
    model: ModelSpec,
    endpoint: EndpointSpec,
    req: ChatRequest,
    defect: Any,
    rng: random.Random,
) -> bool:
    """A policy layer's answer; True when it is a pre-token 403 (nothing more to plan)."""
    mode = rng.choice(defect.modes)
    plan.defect = f"policy_filter:{mode}"
    locale = plan.locale
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
        return True
    text = bank.refusal(locale, rng) if mode == "refusal" else ""
    if mode == "content_filter_cut":
        text = defects.truncate(bank.compose_reply(locale, rng), 0.3)
    plan.chunks = bank.chunk_text(text, locale)
    plan.finish_reason = "content_filter" if mode.startswith("content_filter") else "stop"
    return False


_CALL_DEFECTS = {"tool_unknown_name", "tool_bad_args", "tool_schema_violation"}


def _tool_reply(plan: Plan, turn: tools.ToolTurn, defect: Any, rng: random.Random) -> bool:
    """Plan the reply to a tools request: a call when one is due (or forced by
    `tool_choice_none_violated`), the answer to a tool result; False when the reply is
    the ordinary one (text, or structured output)."""
    kind = defect.kind if defect is not None else None
    due = turn.due
    if due is None and kind == "tool_choice_none_violated" and turn.choice == "none":
        plan.defect = "tool_choice_none_violated"
        due = turn.named or turn.offered[0]
    if due is not None:
        if kind == "tools_ignored":
            plan.defect = "tools_ignored"
            _set_text(plan, bank.compose_reply(plan.locale, rng), None, rng)
            return True
        name = due.function.name
        args = tools.arguments_of(due, rng)
        arguments = tools.dumps(args)
        if kind in _CALL_DEFECTS:
            assert defect is not None
            name, arguments = _broken_call(plan, defect, due, args, rng)
        if kind == "tool_as_text":
            assert defect is not None
            plan.defect = f"tool_as_text:{defect.style}"
            plan.chunks = bank.chunk_text(tools.as_text(name, arguments, defect.style))
            return True
        plan.tool_calls = [tools.call(name, arguments, rng)]
        more = plan.endpoint.parallel_tool_calls - 1  # parallel calls, healthy ones
        plan.tool_calls += [
            tools.call(due.function.name, tools.dumps(tools.arguments_of(due, rng)), rng)
            for _ in range(more)
        ]
        plan.finish_reason = "tool_calls"
        return True
    if turn.results:
        if kind == "tool_result_ignored":
            plan.defect = "tool_result_ignored"
            text = bank.no_access_reply(plan.locale)
        else:
            text = bank.tool_result_reply(plan.locale, tools.result_values(turn.results))
        _set_text(plan, text, defect, rng)
        return True
    return False


def _broken_call(
    plan: Plan, defect: Any, tool: Any, args: Any, rng: random.Random
) -> tuple[str, str]:
    """(name, arguments) of a call a broken tool parser made."""
    name = tool.function.name
    if defect.kind == "tool_unknown_name":
        plan.defect = "tool_unknown_name"
        return f"{name}_v2", tools.dumps(args)
    if defect.kind == "tool_bad_args":
        plan.defect = "tool_bad_args"
        return name, tools.bad_json(args, rng)
    mode, arguments = tools.schema_violation(args, tool.function.parameters, defect.modes, rng)
    plan.defect = f"tool_schema_violation:{mode}"
    return name, arguments


def _stream_defect(
    plan: Plan, defect: Any, req: ChatRequest, scale: float, rng: random.Random
) -> None:
    """How the reply travels: healthy reasoning chunks first (`reasoning: stream`), and
    the defects of the stream itself (buffered, slow, another model's name)."""
    if plan.endpoint.reasoning == "stream" and req.reasoning_wanted != "off":
        plan.reasoning = bank.chunk_text(defects.reasoning_text(rng))
        plan.reasoning_hidden = req.reasoning_wanted == "hidden"
    kind = defect.kind if defect is not None else None
    if kind == "buffered_stream":
        plan.defect = "buffered_stream"
        tokens = len(plan.chunks) + len(plan.reasoning) + (4 if plan.tool_calls else 0)
        plan.delay_s += defect.hold_s * scale + tokens * plan.gap_s
        plan.buffered = True
    elif kind == "slow_output":
        plan.defect = "slow_output"
        plan.gap_s = scale / defect.tokens_per_s
    elif kind == "substituted_model":
        plan.defect = "substituted_model"
        plan.served_model = defect.served_model


_DECORATIONS = {"reasoning_leak", "bpe_markers", "literal_escapes"}


def _set_text(plan: Plan, text: str, defect: Any, rng: random.Random) -> None:
    """The plan's content: `text` as stream tokens, with a decoding or reasoning defect
    applied when one was drawn (any text reply can show them)."""
    kind = defect.kind if defect is not None and defect.kind in _DECORATIONS else None
    if kind == "reasoning_leak":
        plan.defect = f"reasoning_leak:{defect.style}"
        text = defects.reasoning_leak(text, defect.style, defects.reasoning_text(rng))
    elif kind == "literal_escapes" and defect.style == "unicode":
        plan.defect = "literal_escapes:unicode"  # token by token, as a detokeniser escapes
        plan.chunks = defects.unicode_escapes(bank.chunk_text(text, plan.locale))
        return
    elif kind == "literal_escapes":
        plan.defect = f"literal_escapes:{defect.style}"
        text = defects.literal_escapes(text, defect.style)
    elif kind == "bpe_markers":
        plan.defect = "bpe_markers"
        tokens = bank.chunk_text(defects.paragraph_after_opener(text), plan.locale)
        plan.chunks = defects.bpe_markers(tokens, defect.share)
        return
    plan.chunks = bank.chunk_text(text, plan.locale)


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


def _openai_fault(fault: OpenAIErrorFault) -> PreError:
    """The error as an OpenAI-compatible server sends it (its kind in `error.code`)."""
    error = {"message": fault.message, "type": fault.type, "param": fault.param, "code": fault.code}
    kind = fault.code or fault.type
    return PreError(
        fault.status, fault.message, kind, retry_after_s=fault.retry_after_s, body={"error": error}
    )
