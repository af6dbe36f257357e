"""Issue 22 on the wire (contracts-zoo over real HTTP): each defect kind shows its form and
only on its host, healthy hosts show none in any locale; tool calls as OpenRouter sends
them (streamed deltas that assemble into one valid call, non-streamed `tool_calls` with
`content: null`, `tool_choice` honoured, tool results answered); healthy reasoning only in
the reasoning fields; seed-incidents' broken tool parser."""

from __future__ import annotations

import json
import statistics
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import pytest

from fleet.language import LOCALES
from fleet.scenario import load_scenario
from tests.fixtures.fleet import FleetHandle
from tests.fleet.prompts import PROMPTS
from tests.fleet.signs import (
    KINDS,
    LLAMA,
    RESULT_VALUES,
    SCHEMAS,
    TOOLS,
    Reply,
    body,
    fetch,
    signs,
)

TIME_SCALE = 0.05
EXPECTED = {
    "toolxml/fp8": {"tool_as_text"},
    "toolmistral/fp8": {"tool_as_text"},
    "toolkimi/fp8": {"tool_as_text"},
    "toolargs/fp8": {"tool_bad_args"},
    "toolschema/fp8": {"tool_schema_violation"},
    "toolname/fp8": {"tool_unknown_name"},
    "toolsignored/fp8": {"tools_ignored"},
    "nonecaller/fp8": {"tool_choice_none_violated"},
    "resultblind/fp8": {"tool_result_ignored"},
    "thinkleak/fp8": {"reasoning_leak"},
    "bpe/fp8": {"bpe_markers"},
    "escapes/fp8": {"literal_escapes"},
    "buffered/fp8": {"buffered_stream"},
    "crawler/fp8": set(),  # slow_output needs its peers: test_slow_output_far_below_its_peers
    "swapped/fp8": {"substituted_model"},
}
HEALTHY = (
    "deepinfra/fp8", "together/fp8", "fireworks/fp8", "lambda/bf16", "nebius/fp8",
    "parasail/fp8", "groq/fp16", "thinker/bf16", "notools/bf16",
)  # fmt: skip


def _zoo(fleet: FleetHandle, scale: float = TIME_SCALE) -> dict[str, dict[str, Any]]:
    data = fleet.load("contracts-zoo", time_scale=scale, seed=0)
    return {e["tag"]: e for e in data["models"][0]["endpoints"]}


def _run(fleet: FleetHandle, jobs: list[tuple[str, str, str, bool]]) -> list[tuple[Any, ...]]:
    def one(job: tuple[str, str, str, bool]) -> tuple[Any, ...]:
        tag, kind, locale, stream = job
        return (*job, fetch(fleet, body(kind, tag, locale, stream=stream)))

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, jobs))


def test_each_issue22_defect_shows_its_form_only_on_its_host(fleet: FleetHandle) -> None:
    """Over every kind of tools request (required, named, auto with and without a need,
    none, a tool result) streamed and not: each defective host of contracts-zoo shows its
    own kind and no other, every healthy host none, over 17 locales."""
    zoo = _zoo(fleet)
    assert set(zoo) == set(EXPECTED) | set(HEALTHY)
    jobs = [
        (tag, kind, LOCALES[(i + j) % len(LOCALES)], (i + j) % 3 != 0)
        for i, tag in enumerate(sorted(zoo))
        for j, kind in enumerate(KINDS * 2)
    ]
    seen: dict[str, set[str]] = {tag: set() for tag in zoo}
    where: dict[tuple[str, str], tuple[str, str, str]] = {}
    for tag, kind, locale, _stream, reply in _run(fleet, jobs):
        assert reply.status == 200, (tag, kind)
        assert not reply.index_problems, (tag, reply.index_problems)
        tools = "tools" in zoo[tag]["supported_parameters"]
        for sign in signs(reply, kind, advertises_tools=tools):
            seen[tag].add(sign)
            where.setdefault((tag, sign), (kind, locale, reply.content[:60]))
    wrong = {tag: got for tag, got in seen.items() if got != EXPECTED.get(tag, set())}
    assert wrong == {}, {k: v for k, v in where.items() if k[0] in wrong}


@pytest.mark.parametrize("kind", ["required", "named", "auto_call"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_due_call_is_one_structured_call_with_valid_arguments(
    fleet: FleetHandle, kind: str, stream: bool
) -> None:
    """A healthy host answers a due call with one call to the right function: arguments valid
    against its schema (required fields, enums, a nested object), finish `tool_calls`,
    `content` null (non-streamed) or absent; streamed deltas carry `index`, `id`, `type` and
    the name first with empty arguments, then argument pieces under the same index."""
    _zoo(fleet)
    for locale in ("en", "tr", "ja"):
        reply = fetch(fleet, body(kind, "deepinfra/fp8", locale, stream=stream))
        assert reply.index_problems == [] and len(reply.calls) == 1
        call = reply.calls[0]
        expected = "book_table" if kind == "named" else "get_weather"
        assert call["name"] == expected and call["id"].startswith("call_")
        jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[expected])
        assert reply.finish_reason == "tool_calls" and reply.content == ""
        if stream:
            pieces = [
                tc
                for p in reply.payloads
                for c in p["choices"]
                for tc in c["delta"].get("tool_calls") or []
            ]
            assert len(pieces) >= 2 and {tc["index"] for tc in pieces} == {0}
            assert pieces[0]["function"]["arguments"] == ""
        else:
            message = reply.payloads[0]["choices"][0]["message"]
            assert message["content"] is None and message["tool_calls"][0]["type"] == "function"


@pytest.mark.parametrize("kind", ["auto_text", "none", "text"])
def test_no_call_when_none_or_not_needed(fleet: FleetHandle, kind: str) -> None:
    """`tool_choice: none` and an `auto` prompt that names no function get text (finish `stop`)."""
    _zoo(fleet)
    for locale in LOCALES:
        reply = fetch(fleet, body(kind, "together/fp8", locale))
        assert reply.calls == [] and reply.finish_reason == "stop"
        assert reply.content.startswith("*"), reply.content[:40]


def test_tool_result_is_answered_with_its_values_in_every_locale(fleet: FleetHandle) -> None:
    """After the call and a `tool` message, a healthy reply quotes the result's values, in
    the language of the user's message; the result-blind host says it cannot know."""
    _zoo(fleet)
    for locale in LOCALES:
        reply = fetch(fleet, body("result", "fireworks/fp8", locale))
        assert reply.calls == [] and reply.finish_reason == "stop"
        assert all(v in reply.content for v in RESULT_VALUES), (locale, reply.content)
    blind = [fetch(fleet, body("result", "resultblind/fp8", "de")) for _ in range(5)]
    ignored = [r for r in blind if not any(v in r.content for v in RESULT_VALUES)]
    assert len(ignored) >= 3 and all("nicht wissen" in r.content for r in ignored)


def test_endpoint_without_tools_ignores_them(fleet: FleetHandle) -> None:
    """An endpoint whose supported_parameters lack `tools` answers a required call in text
    (its listing says so: `supports_tool_choice` all false)."""
    zoo = _zoo(fleet)
    assert "tools" not in zoo["notools/bf16"]["supported_parameters"]
    reply = fetch(fleet, body("required", "notools/bf16"))
    assert reply.calls == [] and reply.content.startswith("*")
    listing = fleet.http.get(f"{fleet.base_url}/models/{LLAMA}/endpoints").json()
    rows = {e["tag"]: e for e in listing["data"]["endpoints"]}
    assert rows["notools/bf16"]["supports_tool_choice"] == dict.fromkeys(
        ("auto", "none", "required", "function"), False
    )
    assert all(rows["deepinfra/fp8"]["supports_tool_choice"].values())


@pytest.mark.parametrize(
    ("tag", "marker"),
    [
        ("toolxml/fp8", "<tool_call>\n{"),
        ("toolmistral/fp8", "[TOOL_CALLS][{"),
        ("toolkimi/fp8", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"),
    ],
)  # fmt: skip
def test_tool_as_text_writes_the_call_into_content(
    fleet: FleetHandle, tag: str, marker: str
) -> None:
    """tool_as_text: the call (valid arguments) in the model's markup in `content`, no
    `tool_calls`, finish `stop`."""
    _zoo(fleet)
    replies = [fetch(fleet, body("required", tag)) for _ in range(4)]
    leaked = [r for r in replies if r.content.startswith(marker)]
    assert len(leaked) >= 3
    for r in leaked:
        assert r.calls == [] and r.finish_reason == "stop" and "get_weather" in r.content
    payload = leaked[0].content
    if tag == "toolkimi/fp8":
        args = json.loads(payload.split("<|tool_call_argument_begin|>")[1].split("<|")[0])
    elif tag == "toolxml/fp8":
        args = json.loads(payload.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>"))[
            "arguments"
        ]
    else:
        args = json.loads(payload.removeprefix("[TOOL_CALLS]"))[0]["arguments"]
    jsonschema.validate(args, SCHEMAS["get_weather"])


def test_tool_as_text_llama_style_and_seed_incidents_tool_parser(fleet: FleetHandle) -> None:
    """`style: llama` writes `<|python_tag|>{"name", "parameters"}`; seed-incidents' toolparse
    host (rate 0.95) leaks `<tool_call>` markup in most required calls and only there."""
    fleet.load("seed-incidents", time_scale=0.01, seed=0)
    replies = [fetch(fleet, body("required", "toolparse/fp8")) for _ in range(20)]
    leaked = [r for r in replies if r.content.startswith("<tool_call>")]
    assert len(leaked) >= 17 and all(r.finish_reason == "stop" for r in leaked)
    assert all(len(r.calls) == 1 for r in replies if r not in leaked)
    assert all(fetch(fleet, body("text", "toolparse/fp8")).content.startswith("*") for _ in "ab")
    healthy = fetch(fleet, body("required", "deepinfra/fp8"))
    assert len(healthy.calls) == 1 and healthy.content == ""
    scenario = _one_host_scenario({"kind": "tool_as_text", "rate": 1.0, "style": "llama"})
    fleet.load(scenario, time_scale=0.01)
    text = fetch(fleet, body("required", "only/fp8")).content
    assert text.startswith("<|python_tag|>")
    parsed = json.loads(text.removeprefix("<|python_tag|>"))
    assert parsed["name"] == "get_weather"
    jsonschema.validate(parsed["parameters"], SCHEMAS["get_weather"])


def _one_host_scenario(*defects: dict[str, Any], reasoning: str = "off") -> dict[str, Any]:
    return {
        "name": "one-host",
        "models": [
            {
                "id": LLAMA,
                "endpoints": [
                    {
                        "tag": "only/fp8",
                        "provider_name": "Only",
                        "reasoning": reasoning,
                        "defects": list(defects),
                    }
                ],
            }
        ],
    }


@pytest.mark.parametrize(
    ("style", "start", "closed"),
    [
        ("think", "<think>\n", "</think>\n\n*"),
        ("thinking", "<thinking>\n", "</thinking>\n\n*"),
        ("channel", "<|channel|>analysis<|message|>", "<|channel|>final<|message|>*"),
        ("unclosed", "<think>\n", None),
    ],
)
def test_reasoning_leak_styles(
    fleet: FleetHandle, style: str, start: str, closed: str | None
) -> None:
    """reasoning_leak: the reply's content begins with the reasoning block of its style (the
    `unclosed` one never closes), the role-play reply after it."""
    fleet.load(
        _one_host_scenario({"kind": "reasoning_leak", "rate": 1.0, "style": style}),
        time_scale=0.01,
    )
    for locale in ("en", "ar"):
        text = fetch(fleet, body("text", "only/fp8", locale)).content
        assert text.startswith(start)
        if closed is None:
            assert "</think>" not in text and "\n\n*" in text
        else:
            assert closed in text


@pytest.mark.parametrize("locale", LOCALES)
def test_bpe_markers_in_every_locale_and_never_on_healthy(fleet: FleetHandle, locale: str) -> None:
    """bpe_markers: `Ċ` where the paragraph break belongs and `Ġ` for spaces, in every
    locale; put back, the markers give the healthy layout. Healthy replies (Turkish ğ,
    Polish ł, Vietnamese ă and all) never carry a marker."""
    fleet.load(_one_host_scenario({"kind": "bpe_markers", "rate": 1.0}), time_scale=0.01)
    text = fetch(fleet, body("text", "only/fp8", locale)).content
    assert "\u010a\u010a" in text and text.startswith("*")
    if " " in PROMPTS[locale]:
        assert "\u0120" in text or locale in {"ja", "zh-Hans"}
    restored = text.replace("\u0120", " ").replace("\u010a", "\n")
    assert restored.split("\n\n", 1)[0].endswith("*")
    fleet.load(
        _one_host_scenario({"kind": "bpe_markers", "rate": 1.0, "share": 0.3}), time_scale=0.01
    )
    partial = fetch(fleet, body("text", "only/fp8", locale)).content
    if partial.count(" ") + partial.count("\u0120") >= 4:
        assert " " in partial and "\u0120" in partial  # part of the text only
    fleet.load(_one_host_scenario(), time_scale=0.01)
    healthy = fetch(fleet, body("text", "only/fp8", locale)).content
    assert not signs_of_text(healthy)


def signs_of_text(text: str) -> set[str]:
    return signs(Reply(200, content=text, models={LLAMA}), "text")


def test_literal_escapes_styles(fleet: FleetHandle) -> None:
    """literal_escapes: `\\n\\n` written out, `\\u00e9`-style escapes for every non-ASCII
    character, or the whole reply as a JSON string literal."""
    for style in ("newline", "unicode", "double_json"):
        fleet.load(
            _one_host_scenario({"kind": "literal_escapes", "rate": 1.0, "style": style}),
            time_scale=0.01,
        )
        for locale in ("fr", "ru", "ja"):
            text = fetch(fleet, body("text", "only/fp8", locale)).content
            if style == "newline":
                assert "*\\n\\n" in text and "\n" not in text
            elif style == "unicode":
                assert text.isascii() and "\\u" in text
                assert json.loads(f'"{text}"').startswith("*")
            else:
                assert text.startswith('"*') and json.loads(text).startswith("*")


def test_buffered_stream_sends_everything_in_one_chunk_after_a_hold(fleet: FleetHandle) -> None:
    """buffered_stream: keep-alives only for the hold, then the whole reply in one chunk
    (first token ≈ total time); a healthy stream's tokens arrive in many chunks."""
    _zoo(fleet, 0.1)
    bad = [fetch(fleet, body("text", "buffered/fp8")) for _ in range(3)]
    buffered = [r for r in bad if r.output_events == 1]
    assert len(buffered) >= 2
    for r in buffered:
        assert r.ttft_s is not None and r.ttft_s >= 0.6  # hold_s 6 at time_scale 0.1
        assert r.ttft_s >= 0.9 * r.total_s and r.usage and r.usage["completion_tokens"] > 5
    good = fetch(fleet, body("text", "deepinfra/fp8"))
    assert good.output_events == good.usage["completion_tokens"] > 5  # type: ignore[index]
    assert good.ttft_s is not None and good.ttft_s < 0.2


def test_slow_output_far_below_its_peers(fleet: FleetHandle) -> None:
    """slow_output: a normal first token, then far fewer tokens per second than its peers
    and than its listed throughput (scaled by the fleet's time scale)."""
    scale = 0.05
    zoo = _zoo(fleet, scale)

    def rate(r: Reply) -> float:
        assert r.ttft_s is not None and r.usage is not None
        return (r.usage["completion_tokens"] - 1) / max(1e-6, r.total_s - r.ttft_s)

    slow = [fetch(fleet, body("text", "crawler/fp8")) for _ in range(2)]
    peers = [fetch(fleet, body("text", t)) for t in HEALTHY[:6] for _ in range(2)]
    slow_rate = statistics.median(rate(r) for r in slow)
    assert slow_rate < statistics.median(rate(r) for r in peers) / 5
    listed = zoo["crawler/fp8"]["timing"]["tokens_per_s"] / scale
    assert slow_rate < listed / 5
    assert all(r.ttft_s is not None and r.ttft_s < 0.15 for r in slow)


def test_substituted_model_names_another_model_in_every_chunk(fleet: FleetHandle) -> None:
    """substituted_model: every chunk (and the non-streamed body) names `served_model`."""
    _zoo(fleet)
    streamed = [fetch(fleet, body("text", "swapped/fp8")) for _ in range(3)]
    assert sum(r.models == {"meta-llama/llama-3.1-8b-instruct"} for r in streamed) >= 2
    plain = [fetch(fleet, body("text", "swapped/fp8", stream=False)) for _ in range(3)]
    assert any(r.models == {"meta-llama/llama-3.1-8b-instruct"} for r in plain)


@pytest.mark.parametrize("stream", [True, False])
def test_healthy_reasoning_stream_stays_out_of_content(fleet: FleetHandle, stream: bool) -> None:
    """`reasoning: stream`: reasoning tokens in `delta.reasoning` and `reasoning_details`
    before the content (non-streamed: `message.reasoning`), counted as reasoning tokens;
    the content is the healthy reply; `reasoning: {"enabled": false}` turns it off and
    `{"exclude": true}` hides it but counts it."""
    _zoo(fleet)
    reply = fetch(fleet, body("text", "thinker/bf16", "pt-BR", stream=stream))
    assert reply.reasoning and reply.content.startswith("*") and not signs_of_text(reply.content)
    usage = reply.usage or {}
    reasoning_tokens = usage["completion_tokens_details"]["reasoning_tokens"]
    assert reasoning_tokens > 0 and usage["completion_tokens"] > reasoning_tokens
    if stream:
        first_content = next(
            i for i, p in enumerate(reply.payloads) if p["choices"] and p["choices"][0]["delta"].get("content")
        )  # fmt: skip
        details = [
            p["choices"][0]["delta"]["reasoning_details"][0] for p in reply.payloads[:first_content]
        ]
        assert details and all(d["type"] == "reasoning.text" for d in details)
    else:
        message = reply.payloads[0]["choices"][0]["message"]
        assert message["reasoning_details"][0]["text"] == reply.reasoning
    off = fetch(fleet, {**body("text", "thinker/bf16"), "reasoning": {"enabled": False}})
    assert off.reasoning == "" and off.usage
    assert off.usage["completion_tokens_details"]["reasoning_tokens"] == 0
    hidden = fetch(fleet, {**body("text", "thinker/bf16"), "reasoning": {"exclude": True}})
    assert hidden.reasoning == "" and hidden.usage
    assert hidden.usage["completion_tokens_details"]["reasoning_tokens"] > 0


def test_tool_defects_forms(fleet: FleetHandle) -> None:
    """tool_bad_args: arguments that do not parse (half the time); tool_schema_violation:
    valid JSON against the schema's will; tool_unknown_name: a name not offered;
    tools_ignored: a required call answered in text (finish `stop`);
    tool_choice_none_violated: a call although `none`."""
    _zoo(fleet, 0.01)
    args = [fetch(fleet, body("named", "toolargs/fp8")).calls[0]["arguments"] for _ in range(12)]
    broken = [a for a in args if not _parses(a)]
    assert 3 <= len(broken) <= 9
    schema = [fetch(fleet, body("named", "toolschema/fp8")).calls[0] for _ in range(6)]
    invalid = [c for c in schema if _parses(c["arguments"]) and not _valid(c)]
    assert len(invalid) >= 4
    names = {fetch(fleet, body("required", "toolname/fp8")).calls[0]["name"] for _ in range(4)}
    assert names - {t["function"]["name"] for t in TOOLS}
    ignored = [fetch(fleet, body("named", "toolsignored/fp8")) for _ in range(4)]
    assert sum(r.calls == [] and r.finish_reason == "stop" for r in ignored) >= 3
    violated = [fetch(fleet, body("none", "nonecaller/fp8")) for _ in range(4)]
    assert sum(r.finish_reason == "tool_calls" and len(r.calls) == 1 for r in violated) >= 3


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _valid(call: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(SCHEMAS[call["name"]]).is_valid(
        json.loads(call["arguments"])
    )


@pytest.mark.parametrize("stream", [True, False])
def test_issue31_parallel_tool_calls_each_under_its_own_index(
    fleet: FleetHandle, stream: bool
) -> None:
    """An endpoint with `parallel_tool_calls: 3` makes the due call three times: three calls,
    distinct ids, valid arguments; streamed, each call's deltas under its own index (0, 1, 2;
    the first with id, type and name), also when the whole reply is buffered into one chunk."""
    data = load_scenario("contracts-zoo").model_dump(mode="json")
    for ep in data["models"][0]["endpoints"]:
        if ep["tag"] in ("deepinfra/fp8", "buffered/fp8"):
            ep["parallel_tool_calls"] = 3
    fleet.load(data, time_scale=TIME_SCALE, seed=0)
    for tag in ("deepinfra/fp8", "buffered/fp8"):
        reply = fetch(fleet, body("required", tag, stream=stream))
        assert reply.index_problems == [] and len(reply.calls) == 3, (tag, reply.calls)
        assert len({c["id"] for c in reply.calls}) == 3 and reply.finish_reason == "tool_calls"
        for call in reply.calls:
            assert call["name"] == "get_weather", (tag, call)
            jsonschema.validate(json.loads(call["arguments"]), SCHEMAS["get_weather"])
        if stream:
            heads = [
                tc
                for p in reply.payloads
                for c in p["choices"]
                for tc in c["delta"].get("tool_calls") or []
                if "id" in tc
            ]
            assert [tc["index"] for tc in heads] == [0, 1, 2], (tag, heads)
            assert all(tc["type"] == "function" and tc["function"]["name"] for tc in heads)
