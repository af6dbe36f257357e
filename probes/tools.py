"""The tools contract (SPEC C10): its functions, its requests and the pure judges of each
reply. Issue 22.

An endpoint that advertises `tools` gets, each round, in the round's shared locale (the
prompts are probes/data/tools/<locale>.json; function names and schemas are the same
everywhere):

    required × tool_samples   a call forced by naming the function (`tool_choice:
                              {"type": "function", ...}`, or `"required"` where the listing
                              says only that passed); half ask for the weather, half book a
                              table (an enum, required fields, a nested object)
    none × tool_check_samples `tool_choice: "none"`: a question the tool could answer; text only
    auto_need × tool_trigger_samples   `auto`, a prompt that names `get_weather`: a call is due
    auto_plain × tool_trigger_samples  `auto`, arithmetic: no call is due
    result × tool_check_samples        the assistant's call and a `tool` result: the reply
                                       must use a value of the result (13, or WX-4471)

(the prompts follow the rule the fleet's healthy hosts follow: fleet/tools.py `turn`).
Per reply, one `Outcome` (contract TOOLS) with a typed reason:

    as_text               call markup in the content (`leaked_tool_markup`: the marker found)
    ignored               a forced call answered in text (or with another function)
    unknown_name          a call to a function the request did not offer
    inconsistent_deltas   streamed deltas that do not assemble into calls (probes/tool_deltas.py)
    bad_arguments         arguments that are not JSON, or invalid against the schema (which)
    finish_reason         a call whose finish reason is not `tool_calls`
    choice_none_violated  a call under `tool_choice: "none"`
    result_ignored        a reply after the result that calls again or does not use it
    trigger_missed        `auto` prompt that needs the tool, answered without a call
    trigger_spurious      `auto` prompt that needs none, answered with a call

The set's verdicts (probes/tool_verdicts.py) judge shares; trigger rates only against the
peers (probes/peer_round.py).
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from probes.structured import json_path
from probes.textutil import excerpt
from probes.transport import outcome, unjudgeable
from probes.types import Contract, Outcome, OutcomeStatus, ToolCall, Transcript
from wire import jsonio

WEATHER, BOOKING = "get_weather", "book_table"
_TIMES = ["18:00", "18:30", "19:00", "19:30", "20:00", "20:30", "21:00"]
SCHEMAS: dict[str, dict[str, Any]] = {
    WEATHER: {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 80},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    BOOKING: {
        "type": "object",
        "properties": {
            "restaurant": {"type": "string", "minLength": 1, "maxLength": 80},
            "time": {"type": "string", "enum": _TIMES},
            "party": {
                "type": "object",
                "properties": {
                    "adults": {"type": "integer", "minimum": 1, "maximum": 20},
                    "children": {"type": "integer", "minimum": 0, "maximum": 20},
                },
                "required": ["adults"],
                "additionalProperties": False,
            },
        },
        "required": ["restaurant", "time", "party"],
        "additionalProperties": False,
    },
}
_DESCRIPTIONS = {
    WEATHER: "Current weather of a city.",
    BOOKING: "Book a restaurant table for a party at a given time.",
}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {"name": name, "description": _DESCRIPTIONS[name], "parameters": schema},
    }
    for name, schema in SCHEMAS.items()
]
for _schema in SCHEMAS.values():
    Draft202012Validator.check_schema(_schema)
_VALIDATORS = {name: Draft202012Validator(schema) for name, schema in SCHEMAS.items()}
MAX_DEPTH = 16
MAX_ERRORS = 50
RESULT_TEMPERATURE = 13
RESULT_REPORT = "WX-4471"
DATA_DIR = Path(__file__).resolve().parent / "data" / "tools"


# ---- markup leaked into the content ---------------------------------------------------------

# The tool-call markup of the common chat templates, as it appears when an engine's tool
# parser did not turn it into a structured call (Hermes/Qwen, Mistral, Kimi K2, Llama 3,
# DeepSeek, GLM, Granite, Functionary, gpt-oss harmony, OpenAI's own JSON form).
_MARKUP = re.compile(
    r"<tool_call>|</tool_call>|\[TOOL_CALLS\]|\[TOOL_CALL\]"
    r"|<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>|<\|tool_call_argument_begin\|>"
    r"|<\|python_tag\|>|<｜tool▁calls▁begin｜>|<｜tool▁call▁begin｜>|<｜tool▁sep｜>"
    r"|<\|tool_call\|>|<function_calls>|<invoke name=|<function=[A-Za-z_]"
    r"|<\|channel\|>commentary to=functions\.|\bto=functions\.[A-Za-z_]"
    r"|\bfunctions\.[A-Za-z_][A-Za-z0-9_]*:\d+"
    r'|\{\s*"(?:name|function)"\s*:\s*"[A-Za-z_][A-Za-z0-9_]*"\s*,\s*"(?:arguments|parameters)"\s*:',
    re.IGNORECASE,
)
MARKUP_SCAN_CHARS = 20_000


def leaked_tool_markup(text: str) -> str | None:
    """The tool-call marker found in `text` (`<tool_call>`, `[TOOL_CALLS]`,
    `<|tool_call_begin|>`, `functions.NAME:0`, `<|python_tag|>`, a bare `{"name": ...,
    "arguments": ...}` object, ...), or None. Pure; the gateway's acceptance pipeline may use
    it on any content."""
    m = _MARKUP.search(text[:MARKUP_SCAN_CHARS])
    return m.group(0).strip() if m else None


# ---- the requests --------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolProbe:
    """One tool request: which probe it is, its messages, its `tool_choice` and what the
    judge expects (the function a forced call names; None elsewhere)."""

    probe: str
    messages: tuple[dict[str, Any], ...]
    tool_choice: str | dict[str, Any]
    expect: str | None = None


@cache
def tool_pack(locale: str) -> dict[str, Any]:
    """The tool prompts of `locale` (cached; read-only)."""
    pack: dict[str, Any] = json.loads((DATA_DIR / f"{locale}.json").read_text("utf-8"))
    if pack.get("locale") != locale:
        raise ValueError(f"tool pack {locale}.json declares locale {pack.get('locale')!r}")
    return pack


def _turns(pack: dict[str, Any], key: str) -> tuple[dict[str, Any], ...]:
    return ({"role": "system", "content": pack["system"]}, {"role": "user", "content": pack[key]})


def result_messages(pack: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The round trip: the question, the assistant's call and the tool's result."""
    call_id = "call_canary_weather_0"
    args = json.dumps({"city": pack["city"], "unit": "celsius"}, ensure_ascii=False)
    result = {
        "city": pack["city"],
        "temperature_c": RESULT_TEMPERATURE,
        "conditions": "light rain",
        "report": RESULT_REPORT,
    }
    return (
        *_turns(pack, "result_question"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": WEATHER, "arguments": args},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": json.dumps(result, ensure_ascii=False),
        },
    )


def forced_choice(name: str, choices: tuple[str, ...] | None) -> str | dict[str, Any]:
    """Name the function, unless the listing says only `required` passed its testing."""
    if choices is not None and "function" not in choices and "required" in choices:
        return "required"
    return {"type": "function", "function": {"name": name}}


def tool_probes(
    locale: str,
    *,
    samples: int,
    checks: int,
    triggers: int,
    choices: tuple[str, ...] | None = None,
) -> list[ToolProbe]:
    """The tool requests of one probe set (module docstring), in the judge's order. A check
    whose `tool_choice` the listing says did not pass OpenRouter's testing is left out."""
    pack = tool_pack(locale)
    out = []
    for i in range(samples):
        name, key = (WEATHER, "weather") if i % 2 == 0 else (BOOKING, "booking")
        choice = forced_choice(name, choices)
        out.append(
            ToolProbe(
                "required", _turns(pack, key), choice, name if isinstance(choice, dict) else None
            )
        )
    if choices is None or "none" in choices:
        out += [ToolProbe("none", _turns(pack, "none"), "none") for _ in range(checks)]
    if choices is None or "auto" in choices:
        out += [ToolProbe("auto_need", _turns(pack, "auto_need"), "auto") for _ in range(triggers)]
        out += [
            ToolProbe("auto_plain", _turns(pack, "auto_plain"), "auto") for _ in range(triggers)
        ]
        out += [ToolProbe("result", result_messages(pack), "auto") for _ in range(checks)]
    return out


# ---- one reply -----------------------------------------------------------------------------


def _unjudged(t: Transcript) -> Outcome | None:
    """Transport, misrouted, or nothing to judge (a 4xx, an in-band error, no output)."""
    return unjudgeable(t, Contract.TOOLS, "no_output_within_threshold")


def _as_text(t: Transcript, **evidence: object) -> Outcome | None:
    """FAIL `as_text` when call markup is in the content (the marker and the reply's head)."""
    marker = leaked_tool_markup(t.text)
    if marker is None:
        return None
    return _result(
        t, OutcomeStatus.FAIL, "as_text", marker=marker, head=excerpt(t.text, 60), **evidence
    )


def _result(t: Transcript, status: OutcomeStatus, reason: str, **evidence: object) -> Outcome:
    return outcome(t, Contract.TOOLS, status, reason, probe=t.probe, **evidence)


def argument_problem(call: ToolCall) -> dict[str, object] | None:
    """What is wrong with a known function's arguments (not JSON / the schema), or None."""
    try:
        value = jsonio.loads(call.arguments, max_depth=MAX_DEPTH, strict=True)
    except jsonio.WireJSONError as exc:
        return {
            "problem": "not_json",
            "error": str(exc)[:160],
            "arguments": excerpt(call.arguments, 80),
        }
    validator = _VALIDATORS[call.name or ""]
    errors = list(itertools.islice(validator.iter_errors(value), MAX_ERRORS))
    if not errors:
        return None
    worst = best_match(errors)
    return {
        "problem": "schema",
        "path": json_path(worst.absolute_path),
        "validator": str(worst.validator),
        "message": worst.message[:200],
        "arguments": excerpt(call.arguments, 80),
    }


def _call_defect(t: Transcript, expect: str | None) -> Outcome | None:
    """The first defect of a reply's calls: name, deltas, arguments, finish reason."""
    for call in t.tool_calls:
        if call.name not in SCHEMAS:
            return _result(
                t, OutcomeStatus.FAIL, "unknown_name", function=call.name, expected=expect
            )
    if expect is not None and all(c.name != expect for c in t.tool_calls):
        called = ", ".join(str(c.name) for c in t.tool_calls)
        return _result(t, OutcomeStatus.FAIL, "ignored", function=called, expected=expect)
    if t.tool_delta_problems:
        return _result(
            t, OutcomeStatus.FAIL, "inconsistent_deltas", problems=t.tool_delta_problems[:3]
        )
    for call in t.tool_calls:
        problem = argument_problem(call)
        if problem is not None:
            return _result(t, OutcomeStatus.FAIL, "bad_arguments", function=call.name, **problem)
    if (t.finish_reason or "").lower() != "tool_calls":
        return _result(t, OutcomeStatus.FAIL, "finish_reason", finish_reason=t.finish_reason)
    return None


def judge_call(t: Transcript) -> Outcome:
    """A forced call (`required`): a structured, known, well-formed call must come back."""
    unjudged = _unjudged(t)
    if unjudged is not None:
        return unjudged
    leaked = _as_text(t, expected=t.expect)
    if leaked is not None:
        return leaked
    if not t.tool_calls:
        return _result(
            t,
            OutcomeStatus.FAIL,
            "ignored",
            expected=t.expect,
            head=excerpt(t.text, 60),
            finish_reason=t.finish_reason,
        )
    defect = _call_defect(t, t.expect)
    if defect is not None:
        return defect
    return _result(t, OutcomeStatus.PASS, "valid_call", function=t.tool_calls[0].name)


def judge_none(t: Transcript) -> Outcome:
    """`tool_choice: "none"`: text, no call and no call markup."""
    unjudged = _unjudged(t)
    if unjudged is not None:
        return unjudged
    leaked = _as_text(t)
    if leaked is not None:
        return leaked
    if t.tool_calls or (t.finish_reason or "").lower() == "tool_calls":
        called = ", ".join(str(c.name) for c in t.tool_calls) or "(none named)"
        return _result(t, OutcomeStatus.FAIL, "choice_none_violated", function=called)
    return _result(t, OutcomeStatus.PASS, "text", head=excerpt(t.text, 40))


_DIGIT = re.compile(r"\d")


def uses_result(text: str) -> bool:
    """The reply names the temperature (any script's digits: ١٣, ๑๓, １３) or the report id."""
    digits = _DIGIT.sub(lambda m: str(unicodedata.digit(m.group(), 0)), text[:MARKUP_SCAN_CHARS])
    if re.search(rf"(?<!\d){RESULT_TEMPERATURE}(?!\d)", digits):
        return True
    return RESULT_REPORT.lower() in digits.lower()


def judge_result(t: Transcript) -> Outcome:
    """After the call and its result: a text reply that uses a value of the result."""
    unjudged = _unjudged(t)
    if unjudged is not None:
        return unjudged
    leaked = _as_text(t)
    if leaked is not None:
        return leaked
    if t.tool_calls:
        called = ", ".join(str(c.name) for c in t.tool_calls)
        return _result(t, OutcomeStatus.FAIL, "result_ignored", what=f"called {called} again")
    if not uses_result(t.text):
        what = "an empty reply" if not t.text.strip() else "no value of the result"
        return _result(
            t,
            OutcomeStatus.FAIL,
            "result_ignored",
            what=what,
            head=excerpt(t.text, 60),
            expected=[RESULT_TEMPERATURE, RESULT_REPORT],
        )
    return _result(t, OutcomeStatus.PASS, "result_used")


def judge_trigger(t: Transcript) -> Outcome:
    """An `auto` reply: FAIL `trigger_missed` (a call was due, none came) or
    `trigger_spurious` (none was due, one came); call markup in the text counts as the call
    the model meant. These are rates: only the peers turn them into a failure."""
    unjudged = _unjudged(t)
    if unjudged is not None:
        return unjudged
    marker = leaked_tool_markup(t.text)
    called = bool(t.tool_calls) and marker is None
    evidence: dict[str, object] = {"called": called, "marker": marker}
    if t.probe == "auto_need" and not called:
        return _result(
            t, OutcomeStatus.FAIL, "trigger_missed", head=excerpt(t.text, 40), **evidence
        )
    if t.probe == "auto_plain" and (called or marker is not None):
        names = ", ".join(str(c.name) for c in t.tool_calls) or None
        return _result(t, OutcomeStatus.FAIL, "trigger_spurious", function=names, **evidence)
    return _result(t, OutcomeStatus.PASS, "as_expected", **evidence)


JUDGES = {
    "required": judge_call,
    "none": judge_none,
    "result": judge_result,
    "auto_need": judge_trigger,
    "auto_plain": judge_trigger,
}


def judge_tool_reply(t: Transcript) -> Outcome:
    """The outcome of one tool reply by its probe (`ToolProbe.probe`)."""
    return JUDGES[t.probe or "required"](t)
