"""Issue 22's fleet parts that need no server: the tool-call trigger rule, argument
breakers that always break (and valid arguments that always validate), the leak and
decoding transforms, and the property that no healthy endpoint ever shows any of the new
defects, over seeds, the 17 locales and every kind of tools request."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet import bank, defects, tools
from fleet.behaviour import EndpointState, plan_request
from fleet.language import LOCALES
from fleet.request import parse_request
from fleet.scenario import ScenarioError, load_scenario, parse_scenario
from tests.fleet.signs import KINDS, LLAMA, SCHEMAS, TOOLS, Reply, body, signs
from tests.fleet.test_fleet_textgen import schemas

ZOO = load_scenario("contracts-zoo")
SEED = load_scenario("seed-incidents")
HEALTHY = [
    *(e for e in ZOO.models[0].endpoints if not e.defects),
    *(e for e in SEED.models[0].endpoints if not e.defects and not e.faults),
]


def _req(text: str, **extra: Any) -> Any:
    return parse_request(
        {"model": LLAMA, "messages": [{"role": "user", "content": text}], "tools": TOOLS, **extra}
    )


@pytest.mark.parametrize(
    ("text", "choice", "due"),
    [
        ("Call get_weather for Lisbon.", "auto", "get_weather"),
        ("リスボンの天気を get_weather で調べて", "auto", "get_weather"),
        ("Will it rain? Check the weather in Porto.", None, "get_weather"),
        ("Book two tables for tonight, then the weather.", "auto", "book_table"),
        ("get_weather_v2 is not a function we have", "auto", None),
        ("Continue the scene: she pushes open the tavern door.", "auto", None),
        ("Continue the scene.", "required", "get_weather"),
        ("Book a table at Rio.", "required", "book_table"),
        ("Call get_weather.", "none", None),
        ("Anything.", {"type": "function", "function": {"name": "book_table"}}, "book_table"),
        ("Anything.", {"type": "function", "function": {"name": "nope"}}, "get_weather"),
    ],
)
def test_tool_choice_rule(text: str, choice: Any, due: str | None) -> None:
    """The documented rule: auto calls only when the last user message names a function
    (identifier, else a name's last word, earliest wins); required/named always; none never."""
    extra = {} if choice is None else {"tool_choice": choice}
    turn = tools.turn(_req(text, **extra))
    assert (turn.due.function.name if turn.due else None) == due


def test_tool_results_end_the_turn_unless_a_call_is_forced() -> None:
    """A conversation that ends with tool messages is answered in text (auto) with every
    scalar of the result; `required` still forces a call."""
    data = body("result", "x/fp8")
    turn = tools.turn(parse_request(data))
    assert turn.due is None and turn.results == ('{"temperature_c": 17, "condition": "drizzle"}',)
    assert tools.result_values(turn.results) == ["17", "drizzle"]
    assert tools.turn(parse_request({**data, "tool_choice": "required"})).due is not None
    assert tools.result_values(("sunny, 21 degrees",)) == ["sunny, 21 degrees"]
    nested = json.dumps({"a": {"b": [1, True, "x", None]}, "c": 2.5})
    assert tools.result_values((nested,)) == ["1", "true", "x", "2.5"]


def _object(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": sorted(props)}


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text("abcdefgh", min_size=1, max_size=6), schemas, max_size=4),
       st.integers(0, 2**32), st.sampled_from(["missing_required", "wrong_enum", "wrong_type"]))  # fmt: skip
def test_schema_violation_always_parses_and_never_validates(
    props: dict[str, Any], seed: int, mode: str
) -> None:
    """tool_schema_violation: for any parameter schema, the arguments parse as JSON and fail
    the schema; the generated healthy arguments validate."""
    schema = _object(props)
    rng = random.Random(seed)
    args = tools.schema_gen.generate(schema, rng)
    jsonschema.validate(args, schema)
    used, text = tools.schema_violation(args, schema, [mode], rng)
    assert used in {"missing_required", "wrong_enum", "wrong_type"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(text), schema)


def test_schema_violation_modes_do_what_they_say() -> None:
    """missing_required drops a required field, wrong_enum leaves the enum, wrong_type retypes."""
    schema = SCHEMAS["book_table"]
    seen = {}
    for seed in range(20):
        rng = random.Random(seed)
        args = tools.schema_gen.generate(schema, rng)
        for mode in ("missing_required", "wrong_enum", "wrong_type"):
            used, text = tools.schema_violation(args, schema, [mode], rng)
            seen[used] = next(
                jsonschema.Draft202012Validator(schema).iter_errors(json.loads(text))
            ).validator
    assert seen == {"missing_required": "required", "wrong_enum": "enum", "wrong_type": "type"}


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text("abcdefgh", min_size=1, max_size=6), schemas, max_size=4),
       st.integers(0, 2**32))  # fmt: skip
def test_bad_json_never_parses(props: dict[str, Any], seed: int) -> None:
    """tool_bad_args: the arguments never parse as JSON, whatever the schema."""
    rng = random.Random(seed)
    args = tools.schema_gen.generate(_object(props), rng)
    with pytest.raises(ValueError):
        json.loads(tools.bad_json(args, rng))


def test_as_text_styles() -> None:
    """The four leak forms, each carrying the name and the arguments."""
    args = '{"city": "Lisboa", "unit": "celsius"}'
    assert tools.as_text("get_weather", args, "xml") == (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisboa", "unit": "celsius"}}\n</tool_call>'
    )
    assert tools.as_text("get_weather", args, "mistral").startswith(
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {'
    )
    assert tools.as_text("get_weather", args, "kimi") == (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        f"<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>"
    )
    assert tools.as_text("get_weather", args, "llama") == (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Lisboa", "unit": "celsius"}}'
    )


def test_bpe_markers_map_whitespace_only() -> None:
    """Space → Ġ, newline → Ċ, tab → ĉ, CR → č; letters (Turkish ğ, Polish ł) stay; share
    limits the mapping to the first part of the text."""
    assert defects.bpe_markers(["a b\n", "c\td\r"], 1.0) == ["a\u0120b\u010a", "c\u0109d\u010d"]
    assert defects.bpe_markers(["dağ ", "łąka"], 1.0) == ["dağ\u0120", "łąka"]
    assert defects.bpe_markers(["a ", "b ", "c ", "d"], 0.5) == ["a\u0120", "b\u0120", "c ", "d"]
    assert defects.bpe_markers(["彼女は"], 1.0) == ["\u0120彼女は"]


def test_literal_escapes_and_reasoning_leak_forms() -> None:
    """The escape styles and the reasoning-leak styles as pure transforms."""
    reply = "*Elle sourit.* Café ?"
    assert defects.literal_escapes(reply, "newline") == "*Elle sourit.*\\n\\nCafé ?"
    assert defects.literal_escapes(reply, "double_json") == '"*Elle sourit.* Café ?"'
    assert defects.unicode_escapes(["*Elle ", "sourit.* ", "Café"]) == [
        "*Elle ",
        "sourit.* ",
        "Caf\\u00e9",
    ]
    assert defects.unicode_escapes(["\U0001f600"]) == ["\\ud83d\\ude00"]
    assert defects.reasoning_leak("*x*", "channel", "r").startswith(
        "<|channel|>analysis<|message|>r<|end|>"
    )
    assert defects.reasoning_leak("*x*", "unclosed", "r") == "<think>\nr\n\n*x*"


@pytest.mark.parametrize("locale", ["tr", "pl", "vi"])
def test_letters_next_to_the_markers_in_unicode_are_no_markers(locale: str) -> None:
    """Turkish ğ/ı, Polish ł/ą, Vietnamese ă/đ/ĩ sit in the same Unicode block as Ġ/Ċ/ĉ:
    healthy replies carry them and are never taken for BPE markers."""
    texts = [bank.compose_reply(locale, random.Random(seed)) for seed in range(30)]
    block = {c for t in texts for c in t if 0x100 <= ord(c) <= 0x17F}
    assert block and not block & set("\u0120\u010a\u0109\u010d")
    assert all(signs_of(t) == set() for t in texts)


def signs_of(text: str) -> set[str]:
    return signs(Reply(200, content=text, models={LLAMA}), "text")


@settings(max_examples=400, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    index=st.integers(0, len(HEALTHY) - 1),
    locale=st.sampled_from(LOCALES),
    kind=st.sampled_from(KINDS),
    n=st.integers(0, 30),
)
def test_healthy_endpoints_never_show_an_issue22_defect(
    seed: int, index: int, locale: str, kind: str, n: int
) -> None:
    """No healthy endpoint (contracts-zoo's and seed-incidents') shows any of issue 22's
    defects, in any locale, for any kind of request, at any point of its request sequence:
    no markup, reasoning or escapes in content, no BPE markers (the locales' letters such as
    ğ, ł, ă are not markers), the requested model, calls only when due and then valid,
    tokens at the endpoint's own rate, never buffered."""
    endpoint = HEALTHY[index]
    state = EndpointState(seed, LLAMA, endpoint.tag)
    for _ in range(n):
        state.next_request()
    req = parse_request(body(kind, endpoint.tag, locale))
    plan = plan_request(ZOO, ZOO.models[0], endpoint, state, req)
    assert plan.defect is None and plan.pre_error is None and plan.served_model is None
    assert not plan.buffered and plan.gap_s == pytest.approx(1 / endpoint.timing.tokens_per_s)
    calls = [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in plan.tool_calls or []
    ]
    reply = Reply(
        200,
        content=plan.content,
        calls=calls,
        models={LLAMA},
        usage={"completion_tokens": plan.completion_tokens},
    )
    tools_on = "tools" in endpoint.supported_parameters
    assert signs(reply, kind, advertises_tools=tools_on) == set(), (endpoint.tag, plan.content)
    assert len(plan.chunks) > 1 or plan.tool_calls
    assert bool(plan.reasoning) == (endpoint.reasoning == "stream")


NEW_KINDS: dict[str, dict[str, Any]] = {
    "tool_as_text": {"style": "kimi"},
    "tool_schema_violation": {"modes": ["wrong_enum"]},
    "tools_ignored": {},
    "tool_choice_none_violated": {},
    "tool_result_ignored": {},
    "reasoning_leak": {"style": "channel"},
    "bpe_markers": {"share": 0.5},
    "literal_escapes": {"style": "double_json"},
    "buffered_stream": {"hold_s": 2.0},
    "slow_output": {"tokens_per_s": 3.0},
    "substituted_model": {"served_model": "x/y"},
    "tool_bad_args": {},
}
REQUEST_FOR = {
    "tool_choice_none_violated": "none",
    "tool_result_ignored": "result",
    "tool_schema_violation": "named",
    "tool_bad_args": "named",
    "tool_as_text": "required",
    "tools_ignored": "required",
}


def _one(defect: dict[str, Any]) -> dict[str, Any]:
    endpoint = {"tag": "x/fp8", "provider_name": "X", "defects": [defect]}
    return {"models": [{"id": LLAMA, "endpoints": [endpoint]}]}


@pytest.mark.parametrize("kind", sorted(NEW_KINDS))
def test_each_new_kind_works_with_first_n_and_rate(kind: str) -> None:
    """Each new kind loads from a scenario with `first_n` (the first N requests, then
    healthy) or `rate`, and labels the request log's `defect` when it shows."""
    for trigger in ({"first_n": 2}, {"rate": 1.0}):
        scenario = parse_scenario(_one({"kind": kind, **trigger, **NEW_KINDS[kind]}))
        endpoint = scenario.models[0].endpoints[0]
        state = EndpointState(0, LLAMA, endpoint.tag)
        req = parse_request(body(REQUEST_FOR.get(kind, "text"), endpoint.tag))
        labels = [
            plan_request(scenario, scenario.models[0], endpoint, state, req).defect
            for _ in range(4)
        ]
        shown = [label is not None and label.split(":")[0] == kind for label in labels]
        assert shown == ([True, True, False, False] if "first_n" in trigger else [True] * 4)


def test_a_bad_new_kind_parameter_names_its_field() -> None:
    """A wrong `style` is a ScenarioError naming the field (kind names stripped from the path)."""
    with pytest.raises(ScenarioError, match=r"models\.0\.endpoints\.0\.defects\.0\.style"):
        parse_scenario(_one({"kind": "tool_as_text", "rate": 1.0, "style": "json"}))
