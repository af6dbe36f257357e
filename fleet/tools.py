"""Tool calls as a healthy endpoint makes them, and as a broken tool parser breaks them.

Pure: each function takes the parsed request (or its parts) and the caller's seeded RNG.

When a call is due (`turn`; the rule the canary's tool probes rely on, also stated in
`fleet/behaviour.py`):

- `tool_choice: "none"`: never; the reply is text.
- `{"type": "function", "function": {"name": N}}`: always, to N (the first tool when N is
  not among the request's tools).
- `"required"`: always, to the function the last user message names (below), else the
  first tool.
- `"auto"` or absent: only when the last user message names a function: its exact name
  as a whole identifier (`get_weather`, case-sensitive, not inside a longer identifier),
  or else the last word of a name (`weather` of `get_weather` or `getWeather`, at least
  three letters, case-insensitive, as a whole word: not touching a letter, digit or `_`;
  an `s` plural allowed). The function named first in the text wins. A message naming
  none is answered in text.
- A conversation that ends with `tool` messages (results after the assistant's call) is
  answered in text that quotes the results' values, unless `tool_choice` forces a call
  (`required` or a named function).
"""

from __future__ import annotations

import json
import random
import re
import uuid
from dataclasses import dataclass
from typing import Any

import jsonschema

from fleet import schema_gen
from fleet.request import ChatRequest, Tool, last_user_text, message_text

NAME_WORD_MIN = 3
MAX_RESULT_VALUES = 8
MAX_RESULT_CHARS = 200


@dataclass(frozen=True)
class ToolTurn:
    """What a tools request asks for: `choice` (auto | none | required | function), the
    function a healthy endpoint calls now (`due`, None: answer in text), and the contents of
    the tool results that end the conversation (a round trip)."""

    choice: str
    due: Tool | None
    results: tuple[str, ...] = ()
    named: Tool | None = None  # the function the last user message names, if any
    offered: tuple[Tool, ...] = ()


def choice_of(req: ChatRequest) -> str:
    """`tool_choice` as one word: auto (also when absent or unknown), none, required, function."""
    choice = req.tool_choice
    if isinstance(choice, dict):
        return "function"
    if choice in {"none", "required"}:
        return str(choice)
    return "auto"


def _chosen_name(req: ChatRequest) -> str | None:
    choice = req.tool_choice
    if isinstance(choice, dict):
        fn = choice.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return fn["name"]
    return None


def _last_word(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    words = [w for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]
    return words[-1].lower() if words else ""


def named_in(text: str, tools: list[Tool]) -> Tool | None:
    """The function `text` names (exact identifier first, then a name's last word), the one
    named earliest in the text; None when it names none (pure)."""
    for exact in (True, False):
        best: tuple[int, Tool] | None = None
        for tool in tools:
            name = tool.function.name
            if exact:
                pattern = rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])"
                flags = 0
            else:
                word = _last_word(name)
                if len(word) < NAME_WORD_MIN:
                    continue
                pattern, flags = rf"(?<!\w){re.escape(word)}s?(?!\w)", re.IGNORECASE
            found = re.search(pattern, text, flags)
            if found is not None and (best is None or found.start() < best[0]):
                best = (found.start(), tool)
        if best is not None:
            return best[1]
    return None


def trailing_results(req: ChatRequest) -> tuple[str, ...]:
    """The contents of the `tool` messages that end the conversation (empty if none)."""
    out: list[str] = []
    for message in reversed(req.messages):
        if message.role != "tool":
            break
        out.append(message_text(message))
    return tuple(reversed(out))


def turn(req: ChatRequest) -> ToolTurn:
    """Decide what a healthy endpoint does with a request that carries tools (the rule in
    the module docstring)."""
    tools = req.tools or []
    assert tools, "turn() needs a request with tools"
    choice = choice_of(req)
    results = trailing_results(req)
    named = named_in(last_user_text(req), tools)
    due: Tool | None = None
    if choice == "function":
        wanted = _chosen_name(req)
        due = next((t for t in tools if t.function.name == wanted), tools[0])
    elif choice == "required":
        due = named or tools[0]
    elif choice == "auto" and not results:
        due = named
    return ToolTurn(choice, due, results, named, tuple(tools))


def call_id(rng: random.Random) -> str:
    return "call_" + uuid.UUID(int=rng.getrandbits(128)).hex[:24]


def arguments_of(tool: Tool, rng: random.Random) -> Any:
    """Arguments valid against the function's parameter schema (an object)."""
    args = schema_gen.generate(tool.function.parameters, rng)
    return args if args is not None else {}


def call(name: str, arguments: str, rng: random.Random) -> dict[str, Any]:
    """One call in the non-streamed `message.tool_calls` shape."""
    return {
        "id": call_id(rng),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# ---- broken arguments -------------------------------------------------------------------

BAD_JSON_FORMS = ("truncated", "single_quotes", "trailing_comma", "unquoted_keys")


def bad_json(args: Any, rng: random.Random) -> str:
    """Arguments that do not parse as JSON, in one of the forms a broken parser produces."""
    text = dumps(args)
    form = rng.choice(BAD_JSON_FORMS)
    if form == "truncated":
        out = text[: max(1, len(text) // 2)] if len(text) > 2 else '{"'
    elif form == "single_quotes":
        out = repr(args) if args else "{'"
    elif form == "trailing_comma":
        out = text[:-1] + ", }" if text.endswith("}") else text + ","
    else:
        out = re.sub(r'"([A-Za-z_][A-Za-z0-9_]*)":', r"\1:", text)
    try:
        json.loads(out)
    except ValueError:
        return out
    return "{not json"


def _is_valid(instance: Any, schema: dict[str, Any]) -> bool:
    try:
        return bool(jsonschema.Draft202012Validator(schema).is_valid(instance))
    except (jsonschema.exceptions.SchemaError, RecursionError, TypeError, ValueError):
        return True  # cannot tell: treat as still valid, so a surer violation is tried


def _properties(
    schema: Any, instance: Any, root: dict[str, Any], path: tuple[str, ...] = (), depth: int = 0
) -> list[tuple[tuple[str, ...], dict[str, Any], Any]]:
    """(path, property schema, value) for every object property present in `instance`,
    nested objects included ($ref resolved)."""
    schema = schema_gen._resolve(schema, root)
    if not isinstance(schema, dict) or not isinstance(instance, dict) or depth > 8:
        return []
    props = schema.get("properties")
    out: list[tuple[tuple[str, ...], dict[str, Any], Any]] = []
    for key, sub in (props if isinstance(props, dict) else {}).items():
        if key not in instance:
            continue
        sub = schema_gen._resolve(sub, root)
        if isinstance(sub, dict):
            out.append(((*path, key), sub, instance[key]))
            out.extend(_properties(sub, instance[key], root, (*path, key), depth + 1))
    return out


def _required_here(
    schema: Any, instance: Any, root: dict[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Paths of required properties present in `instance`, nested objects included."""
    schema = schema_gen._resolve(schema, root)
    if not isinstance(schema, dict) or not isinstance(instance, dict):
        return []
    wanted = schema.get("required")
    out = [(*path, k) for k in (wanted if isinstance(wanted, list) else []) if k in instance]
    for p, sub, value in _properties(schema, instance, root, path)[:50]:
        if len(p) == len(path) + 1:
            out.extend(_required_here(sub, value, root, p))
    return out


def _set(instance: Any, path: tuple[str, ...], value: Any, delete: bool = False) -> Any:
    out = json.loads(json.dumps(instance))
    node = out
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def _off_enum(enum: list[Any]) -> Any:
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in enum):
        return max(enum) + 1
    candidate = "other"
    while candidate in enum:
        candidate += "_value"
    return candidate


def _violations(mode: str, args: Any, schema: dict[str, Any]) -> list[Any]:
    """Candidate broken instances of one mode (the first that no longer validates wins)."""
    if mode == "missing_required":
        return [_set(args, p, None, delete=True) for p in _required_here(schema, args, schema)]
    props = _properties(schema, args, schema)
    if mode == "wrong_enum":
        return [
            _set(args, p, _off_enum(sub["enum"]))
            for p, sub, _ in props
            if isinstance(sub.get("enum"), list) and sub["enum"]
        ]
    return [
        _set(args, p, schema_gen._wrong_type(value)) for p, sub, value in props if "type" in sub
    ]


def schema_violation(
    args: Any, schema: dict[str, Any], modes: list[str], rng: random.Random
) -> tuple[str, str]:
    """(mode, arguments): valid JSON that violates `schema`: a required field missing, a value
    outside its enum, or a value of the wrong type. The mode is drawn from `modes`; one
    the arguments give no handle for is replaced by the next that works, and an array
    in place of the object is the last resort."""
    order = [*rng.sample(modes, len(modes)), *(m for m in _ALL_MODES if m not in modes)]
    for mode in order:
        candidates = _violations(mode, args, schema)
        rng.shuffle(candidates)
        for broken in candidates[:20]:
            if not _is_valid(broken, schema):
                return mode, dumps(broken)
    return "wrong_type", dumps([args])


_ALL_MODES = ("missing_required", "wrong_enum", "wrong_type")


# ---- calls written as text ------------------------------------------------------------------


def as_text(name: str, arguments: str, style: str) -> str:
    """The call written into `content` in a model's own tool markup (a parser that failed)."""
    try:
        args: Any = json.loads(arguments)
    except ValueError:
        args = arguments
    if style == "mistral":
        return "[TOOL_CALLS]" + dumps([{"name": name, "arguments": args}])
    if style == "kimi":
        return (
            "<|tool_calls_section_begin|><|tool_call_begin|>"
            f"functions.{name}:0<|tool_call_argument_begin|>{arguments}"
            "<|tool_call_end|><|tool_calls_section_end|>"
        )
    if style == "llama":
        return "<|python_tag|>" + dumps({"name": name, "parameters": args})
    return "<tool_call>\n" + dumps({"name": name, "arguments": args}) + "\n</tool_call>"


# ---- tool results ----------------------------------------------------------------------------


def _scalars(value: Any, out: list[str], depth: int = 0) -> None:
    if len(out) >= MAX_RESULT_VALUES or depth > 8:
        return
    if isinstance(value, dict):
        for v in value.values():
            _scalars(v, out, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _scalars(v, out, depth + 1)
    elif isinstance(value, str):
        if value.strip():
            out.append(value.strip()[:MAX_RESULT_CHARS])
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int | float):
        out.append(json.dumps(value))


def result_values(results: tuple[str, ...]) -> list[str]:
    """The values a healthy reply quotes from tool results: every scalar of a JSON result
    (strings, numbers, booleans; at most eight), or the text of a result that is not JSON."""
    out: list[str] = []
    for content in results:
        try:
            parsed = json.loads(content)
        except ValueError:
            parsed = content
        before = len(out)
        _scalars(parsed, out)
        if len(out) == before and content.strip():
            out.append(content.strip()[:MAX_RESULT_CHARS])
    return out[:MAX_RESULT_VALUES]
