"""A client's chat parameters checked at the door (pure): the OpenAI chat-completions
parameters the gateway acts on or forwards, by type and range, as OpenAI's API documents
them (the `openai` package's `CompletionCreateParams`).

    parameter_problem(body)   (field, message) for the first parameter of `body` that breaks
                              its rule, else None; the message names the field

`RULES` is the table: field -> rule, a function of the value giving what is wrong with it
(and where, below the field) or None. A null value is an absent one (OpenAI takes null for
its optional parameters); `messages` alone is required. Booleans are not numbers
(`max_tokens: true` is refused) and a number must be finite. `n` may only be 1: the gateway
answers one choice per request. A field not in the table passes as it is (OpenRouter's own,
`top_k` or `reasoning`, newer OpenAI ones, unknown ones: forwarded or dropped as
`routing.attempt.upstream_body` says); the contract's keys (`tools`, `tool_choice`,
`functions`, `function_call`) are refused whole whatever their shape
(`routing.attempt.refused_keys`).

Cheap on the hot path: plain checks of the few fields a body carries, no model built.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# what a rule found: (where below the field, e.g. "[2].role" or "", what is wrong)
Problem = tuple[str, str]
Rule = Callable[[Any], Problem | None]

ROLES = frozenset({"developer", "system", "user", "assistant", "tool", "function"})
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
MAX_STOP = 4  # OpenAI: up to 4 stop sequences
LOGIT_BIAS = 100  # OpenAI: each bias an integer between -100 and 100
MAX_TOP_LOGPROBS = 20
SHOWN_CHARS = 40  # of a client's value quoted in a message


def shown(value: Any) -> str:
    """A client's value as a message quotes it: its JSON spelling for a scalar (a string
    cut to SHOWN_CHARS), its JSON type for a container."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)[:SHOWN_CHARS]
    if isinstance(value, str):
        cut = value[:SHOWN_CHARS] + ("..." if len(value) > SHOWN_CHARS else "")
        return f"the string {cut!r}"
    return "an array" if isinstance(value, list) else "an object"


def _bad(what: str, value: Any, at: str = "") -> Problem:
    return at, f"must be {what}, got {shown(value)}"


def _is_int(value: Any) -> bool:
    return type(value) is int  # `type`, not isinstance: a boolean is no integer


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or (kind is float and math.isfinite(value))


def integer(lo: int | None = None, hi: int | None = None, what: str = "an integer") -> Rule:
    """An integer (not a boolean) within [lo, hi] (either bound may be open)."""

    def rule(value: Any) -> Problem | None:
        ok = _is_int(value) and (lo is None or value >= lo) and (hi is None or value <= hi)
        return None if ok else _bad(what, value)

    return rule


def number(lo: float, hi: float) -> Rule:
    """A finite number (not a boolean) within [lo, hi]."""
    what = f"a number between {lo:g} and {hi:g}"

    def rule(value: Any) -> Problem | None:
        return None if _is_number(value) and lo <= value <= hi else _bad(what, value)

    return rule


def boolean(value: Any) -> Problem | None:
    return None if isinstance(value, bool) else _bad("a boolean (true or false)", value)


def string(value: Any) -> Problem | None:
    return None if isinstance(value, str) else _bad("a string", value)


def one_choice(value: Any) -> Problem | None:
    """`n`: this gateway answers one choice per request (the workload's contract judges one
    reply), so only 1."""
    if _is_int(value) and value == 1:
        return None
    return _bad("1 (this gateway answers one choice per request)", value)


def stop(value: Any) -> Problem | None:
    """A string or a list of up to MAX_STOP strings."""
    if isinstance(value, str):
        return None
    what = f"a string or a list of up to {MAX_STOP} strings"
    if not isinstance(value, list) or len(value) > MAX_STOP:
        return _bad(what, value)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            return _bad("a string", item, f"[{i}]")
    return None


def logit_bias(value: Any) -> Problem | None:
    """An object of token ids (digit strings) -> an integer bias within +-LOGIT_BIAS."""
    if not isinstance(value, dict):
        return _bad("an object of token ids to biases", value)
    for key, bias in value.items():
        if not (isinstance(key, str) and key.isdigit() and key.isascii()):
            return "", f"must be keyed by token ids (strings of digits), got the key {key!r:.40}"
        if not (_is_int(bias) and -LOGIT_BIAS <= bias <= LOGIT_BIAS):
            return _bad(f"an integer between -{LOGIT_BIAS} and {LOGIT_BIAS}", bias, f"[{key}]")
    return None


def string_map(value: Any) -> Problem | None:
    """An object of string values (`metadata`)."""
    if not isinstance(value, dict):
        return _bad("an object of strings", value)
    for key, item in value.items():
        if not isinstance(item, str):
            return _bad("a string", item, f".{str(key)[:SHOWN_CHARS]}")
    return None


def stream_options(value: Any) -> Problem | None:
    """An object; its `include_usage` and `include_obfuscation`, when set, booleans (a
    stream ends with the usage chunk only when `include_usage` asks for it, as OpenAI's:
    routing/gateway.py)."""
    if not isinstance(value, dict):
        return _bad("an object", value)
    for key in ("include_usage", "include_obfuscation"):
        flag = value.get(key)
        if flag is not None and not isinstance(flag, bool):
            return _bad("a boolean (true or false)", flag, f".{key}")
    return None


def response_format(value: Any) -> Problem | None:
    """An object whose `type` is text, json_object or json_schema; a json_schema one carries
    a `json_schema` object with a string `name`, an object `schema` and a boolean `strict`
    (the last two optional). The schema itself is the upstream's to judge."""
    if not isinstance(value, dict):
        return _bad("an object", value)
    kind = value.get("type")
    if kind not in RESPONSE_FORMATS:
        return _bad(f"one of {', '.join(RESPONSE_FORMATS)}", kind, ".type")
    if kind != "json_schema":
        return None
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        return _bad("an object", spec, ".json_schema")
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        return _bad("a non-empty string", spec.get("name"), ".json_schema.name")
    if spec.get("schema") is not None and not isinstance(spec["schema"], dict):
        return _bad("an object", spec["schema"], ".json_schema.schema")
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        return _bad("a boolean (true or false)", spec["strict"], ".json_schema.strict")
    return None


def messages(value: Any) -> Problem | None:
    """A non-empty list of objects, each with a `role` of ROLES and a `content` that is a
    string, a list of parts (objects) or null."""
    if not isinstance(value, list) or not value:
        return _bad("a non-empty list of messages", value)
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            return _bad("an object", message, f"[{i}]")
        role = message.get("role")
        if type(role) is not str or role not in ROLES:
            return _bad(f"one of {', '.join(sorted(ROLES))}", role, f"[{i}].role")
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            return _bad("a string, a list of parts or null", content, f"[{i}].content")
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                return _bad("an object", part, f"[{i}].content[{j}]")
    return None


POSITIVE = "a positive integer"
# field -> its rule (see the module docstring); OpenAI's documented types and ranges
RULES: dict[str, Rule] = {
    "messages": messages,
    "stream": boolean,
    "stream_options": stream_options,
    "max_tokens": integer(1, what=POSITIVE),
    "max_completion_tokens": integer(1, what=POSITIVE),
    "n": one_choice,
    "temperature": number(0.0, 2.0),
    "top_p": number(0.0, 1.0),
    "presence_penalty": number(-2.0, 2.0),
    "frequency_penalty": number(-2.0, 2.0),
    "seed": integer(),
    "stop": stop,
    "logit_bias": logit_bias,
    "logprobs": boolean,
    "top_logprobs": integer(0, MAX_TOP_LOGPROBS, f"an integer between 0 and {MAX_TOP_LOGPROBS}"),
    "response_format": response_format,
    "parallel_tool_calls": boolean,
    "store": boolean,
    "user": string,
    "metadata": string_map,
}
REQUIRED = ("messages",)


def parameter_problem(body: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) for the first parameter of `body` that breaks its rule in `RULES`
    (a required one missing included), else None. `field` is the path of what is wrong
    (`messages[2].role`, `stop[1]`); the message starts with it."""
    for key in REQUIRED:
        if body.get(key) is None:
            return key, f"{key} is required"
    for key, value in body.items():
        rule = RULES.get(key)
        if rule is None or value is None:
            continue
        found = rule(value)
        if found is not None:
            at, what = found
            return key + at, f"{key}{at} {what}"
    return None
