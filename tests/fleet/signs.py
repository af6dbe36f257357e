"""Issue 22's defects as a client sees them on the wire, for the fleet's own tests: a
streamed or non-streamed reply read with its chunk times, and the signs of each defect
kind in it. The canary's judges live in probes/; this is the fleet's test oracle.

Also the functions and prompts the fleet's tool tests send (the probes define their own:
the fleet works with any `tools`)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from tests.fixtures.fleet import FleetHandle
from tests.fleet.prompts import PROMPTS

LLAMA = "meta-llama/llama-3.3-70b-instruct"

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather and a forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
BOOKING: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "book_table",
        "description": "Reserve a table at a restaurant.",
        "parameters": {
            "type": "object",
            "properties": {
                "restaurant": {"type": "string", "minLength": 1},
                "party": {
                    "type": "object",
                    "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 12},
                        "names": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                        "seating": {"enum": ["indoor", "terrace"]},
                    },
                    "required": ["size", "seating"],
                    "additionalProperties": False,
                },
            },
            "required": ["restaurant", "party"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [WEATHER, BOOKING]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
RESULT = {"temperature_c": 17, "condition": "drizzle"}
RESULT_VALUES = ("17", "drizzle")

BPE_MARKERS = re.compile("[\u0120\u010a\u0109\u010d]")  # Ġ Ċ ĉ č: never letters of our locales
TOOL_MARKUP = (
    "<tool_call>",
    "[TOOL_CALLS]",
    "<|tool_call",
    "<|tool_calls_section",
    "<|python_tag|>",
    "functions.",
)
REASONING_START = re.compile(r"^\s*(<think>|<thinking>|<\|channel\|>)")
LITERAL_ESCAPE = re.compile(r"\\n|\\u[0-9a-fA-F]{4}")

# what each kind of request expects of a healthy tools endpoint
KINDS = ("text", "required", "named", "auto_call", "auto_text", "none", "result")
CALL_DUE = {"required": "get_weather", "named": "book_table", "auto_call": "get_weather"}


def body(kind: str, tag: str, locale: str = "en", *, stream: bool = True) -> dict[str, Any]:
    """A pinned request of one kind (KINDS) in `locale`; prompts that must trigger a call
    name the function's identifier, the others name none."""
    scene = PROMPTS[locale]
    out: dict[str, Any] = {
        "model": LLAMA,
        "messages": [{"role": "user", "content": scene}],
        "provider": {"only": [tag], "allow_fallbacks": False},
        "stream": stream,
        "max_tokens": 300,
    }
    if kind == "text":
        return out
    out["tools"] = TOOLS
    if kind == "required":
        out["tool_choice"] = "required"
    elif kind == "named":
        out["tool_choice"] = {"type": "function", "function": {"name": "book_table"}}
    elif kind in {"auto_call", "result"}:
        out["messages"] = [{"role": "user", "content": f"{scene} (get_weather: Lisboa)"}]
        out["tool_choice"] = "auto"
    elif kind == "none":
        out["messages"] = [{"role": "user", "content": f"{scene} (get_weather: Lisboa)"}]
        out["tool_choice"] = "none"
    if kind == "result":
        call = {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                "arguments": '{"city": "Lisboa", "unit": "celsius"}'}}  # fmt: skip
        out["messages"] += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(RESULT)},
        ]
    return out


@dataclass
class Reply:
    """One reply as a client reads it."""

    status: int
    streamed: bool = False
    content: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    models: set[str] = field(default_factory=set)
    reasoning: str = ""
    usage: dict[str, Any] | None = None
    ttft_s: float | None = None
    total_s: float = 0.0
    output_events: int = 0  # data events carrying content or tool-call pieces
    index_problems: list[str] = field(default_factory=list)
    payloads: list[dict[str, Any]] = field(default_factory=list)


def _fold_call(reply: Reply, tc: dict[str, Any]) -> None:
    """Assemble streamed tool-call deltas, recording any inconsistency in their indices."""
    index = tc.get("index")
    if not isinstance(index, int):
        reply.index_problems.append(f"delta without index: {tc}")
        return
    fn = tc.get("function") or {}
    if index == len(reply.calls):
        if not (tc.get("id") and tc.get("type") == "function" and fn.get("name")):
            reply.index_problems.append(f"first delta of call {index} lacks id/type/name: {tc}")
        # a healthy stream opens a call with empty arguments; a buffered one sends it whole
        reply.calls.append(
            {"id": tc.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments") or ""}
        )
        return
    if index > len(reply.calls):
        reply.index_problems.append(f"index {index} skips ahead")
        return
    if tc.get("id") or fn.get("name"):
        reply.index_problems.append(f"later delta of call {index} renames it: {tc}")
    reply.calls[index]["arguments"] += fn.get("arguments") or ""


def _fold(reply: Reply, payload: dict[str, Any], at_s: float) -> None:
    reply.payloads.append(payload)
    if isinstance(payload.get("model"), str):
        reply.models.add(payload["model"])
    if payload.get("usage"):
        reply.usage = payload["usage"]
    for choice in payload.get("choices") or []:
        delta = choice.get("delta") or {}
        piece = delta.get("content")
        calls = delta.get("tool_calls") or []
        if piece or calls:
            reply.output_events += 1
            if reply.ttft_s is None:
                reply.ttft_s = at_s
        reply.content += piece or ""
        reply.reasoning += delta.get("reasoning") or ""
        for tc in calls:
            _fold_call(reply, tc)
        if choice.get("finish_reason"):
            reply.finish_reason = choice["finish_reason"]


def fetch(fleet: FleetHandle, request: dict[str, Any]) -> Reply:
    """Send `request` and read the reply (streamed: event by event, with times)."""
    headers = {"Authorization": f"Bearer {fleet.key}"}
    url = f"{fleet.base_url}/chat/completions"
    start = time.monotonic()
    if not request.get("stream"):
        r = fleet.http.post(url, json=request, headers=headers, timeout=60)
        reply = Reply(r.status_code, total_s=time.monotonic() - start)
        if r.status_code != 200:
            return reply
        data = r.json()
        reply.payloads.append(data)
        reply.models.add(data["model"])
        reply.usage = data.get("usage")
        choice = data["choices"][0]
        message = choice["message"]
        reply.content = message.get("content") or ""
        reply.reasoning = message.get("reasoning") or ""
        reply.finish_reason = choice["finish_reason"]
        reply.calls = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls") or []
        ]
        reply.output_events = 1
        return reply
    with fleet.http.stream("POST", url, json=request, headers=headers, timeout=60) as r:
        reply = Reply(r.status_code, streamed=True)
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                _fold(reply, json.loads(line[6:]), time.monotonic() - start)
    reply.total_s = time.monotonic() - start
    return reply


def signs(reply: Reply, kind: str, *, advertises_tools: bool = True) -> set[str]:
    """The issue-22 defect kinds `reply` to a request of `kind` shows (empty: healthy).
    `slow_output` needs peers and is judged apart."""
    found: set[str] = set()
    text = reply.content
    if any(m in text for m in TOOL_MARKUP):
        found.add("tool_as_text")
    if REASONING_START.match(text):
        found.add("reasoning_leak")
    if BPE_MARKERS.search(text):
        found.add("bpe_markers")
    if LITERAL_ESCAPE.search(text) or (text.startswith('"') and text.endswith('"')):
        found.add("literal_escapes")
    if reply.models != {LLAMA}:
        found.add("substituted_model")
    tokens = (reply.usage or {}).get("completion_tokens", 0)
    if reply.streamed and reply.output_events == 1 and tokens > 1:
        found.add("buffered_stream")
    for call in reply.calls:
        if call["name"] not in SCHEMAS:
            found.add("tool_unknown_name")
            continue
        try:
            args = json.loads(call["arguments"])
        except ValueError:
            found.add("tool_bad_args")
            continue
        if not jsonschema.Draft202012Validator(SCHEMAS[call["name"]]).is_valid(args):
            found.add("tool_schema_violation")
    if not advertises_tools:
        return found
    due = CALL_DUE.get(kind)
    if due is not None and not reply.calls and "tool_as_text" not in found:
        found.add("tools_ignored")
    if kind in {"none", "auto_text", "result", "text"} and reply.calls:
        found.add("tool_choice_none_violated" if kind == "none" else "unexpected_call")
    first = reply.calls[0]["name"] if reply.calls else None
    if due is not None and first in SCHEMAS and first != due:
        found.add("wrong_function")
    if kind == "result" and not any(v in text for v in RESULT_VALUES):
        found.add("tool_result_ignored")
    return found
