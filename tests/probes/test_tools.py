"""C10: the tools contract's pure parts on hand-made transcripts: leaked markup, each typed
reason of one reply, the set's verdicts and its requests (probes/tools.py,
probes/tool_verdicts.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ground.settings import ProbeConfig
from probes.evidence import evidence_text
from probes.prompts import LOCALES
from probes.tool_verdicts import judge_tools
from probes.tools import (
    BOOKING,
    TOOLS,
    WEATHER,
    judge_call,
    judge_none,
    judge_result,
    judge_trigger,
    leaked_tool_markup,
    tool_pack,
    tool_probes,
    uses_result,
)
from probes.types import Contract, Endpoint, OutcomeStatus, ToolCall, Transcript
from tests.data.variants import clean_locales, load_clean
from wire.transport import TransportCode

FAIL, PASS, S = OutcomeStatus.FAIL, OutcomeStatus.PASS, OutcomeStatus
GOOD_WEATHER = json.dumps({"city": "Lisbon", "unit": "celsius"})
GOOD_BOOKING = json.dumps({"restaurant": "Casa Azul", "time": "19:30", "party": {"adults": 2, "children": 1}})  # fmt: skip
ENDPOINT = Endpoint(
    model_id="m/x",
    tag="h/fp8",
    provider_name="H",
    supported_parameters=("max_tokens", "tools", "tool_choice"),
)


def tr(probe: str = "required", **kw: Any) -> Transcript:
    """A finished 200 reply of the tool probe `probe` (a call to get_weather by default)."""
    base: dict[str, Any] = {
        "request_id": kw.pop("request_id", "r1"),
        "model_id": "m/x",
        "tag": "h/fp8",
        "pinned_provider": "H",
        "served_by": "H",
        "contract": Contract.TOOLS,
        "locale": "en",
        "probe": probe,
        "expect": WEATHER if probe == "required" else None,
        "http_status": 200,
        "done": True,
        "finish_reason": "tool_calls",
        "tool_calls": [ToolCall(index=0, id="call_1", name=WEATHER, arguments=GOOD_WEATHER)],
    }
    base.update(kw)
    return Transcript(**base)


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n</tool_call>', "<tool_call>"),
        ('[TOOL_CALLS][{"name": "get_weather", "arguments": {}}]', "[TOOL_CALLS]"),
        ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{}", "<|tool_calls_section_begin|>"),
        ('functions.get_weather:0 {"city": "Lisbon"}', "functions.get_weather:0"),
        ('<|python_tag|>{"name": "get_weather", "parameters": {}}', "<|python_tag|>"),
        ('{"name": "get_weather", "arguments": {"city": "Lisbon"}}', '{"name": "get_weather", "arguments":'),
        ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather", "<｜tool▁calls▁begin｜>"),
        ('<function=get_weather>{"city": "Lisbon"}</function>', "<function=g"),
    ],
)  # fmt: skip
def test_c10_leaked_markup_names_its_marker(text: str, marker: str) -> None:
    """C10: the common leak forms are found, and the marker found is returned."""
    assert leaked_tool_markup(text) == marker
    assert leaked_tool_markup("Sure! " + text) is not None


def test_c10_markup_detector_never_fires_on_clean_text() -> None:
    """C10: no clean corpus reply (17 locales) and no tool prompt holds tool markup."""
    assert not [t[:40] for loc in clean_locales() for t in load_clean(loc) if leaked_tool_markup(t)]
    for loc in LOCALES:
        pack = tool_pack(loc)
        assert not [k for k, v in pack.items() if isinstance(v, str) and leaked_tool_markup(v)]


def test_c10_a_healthy_forced_call_passes() -> None:
    """C10: a known function, JSON arguments valid against its schema, finish tool_calls."""
    assert (judge_call(tr()).status, judge_call(tr()).reason) == (PASS, "valid_call")
    booking = tr(expect=BOOKING, tool_calls=[ToolCall(index=0, id="c", name=BOOKING, arguments=GOOD_BOOKING)])  # fmt: skip
    assert judge_call(booking).status is PASS


@pytest.mark.parametrize(
    ("changes", "reason", "evidence"),
    [
        ({"tool_calls": [], "text": '<tool_call>{"name": "get_weather"}</tool_call>'}, "as_text", {"marker": "<tool_call>"}),
        ({"tool_calls": [], "text": "It is sunny in Lisbon.", "finish_reason": "stop"}, "ignored", {"expected": WEATHER}),
        ({"tool_calls": [ToolCall(index=0, id="c", name="get_weather_v2", arguments=GOOD_WEATHER)]}, "unknown_name", {"function": "get_weather_v2"}),
        ({"tool_calls": [ToolCall(index=0, id="c", name=BOOKING, arguments=GOOD_BOOKING)]}, "ignored", {"function": BOOKING}),
        ({"tool_delta_problems": ["index 0 changed id mid-call"]}, "inconsistent_deltas", {}),
        ({"tool_calls": [ToolCall(index=0, id="c", name=WEATHER, arguments='{"city": "Lis')]}, "bad_arguments", {"problem": "not_json"}),
        ({"tool_calls": [ToolCall(index=0, id="c", name=WEATHER, arguments='{"city": "Lisbon", "unit": "kelvin"}')]}, "bad_arguments", {"problem": "schema", "path": "$.unit", "validator": "enum"}),
        ({"tool_calls": [ToolCall(index=0, id="c", name=WEATHER, arguments='{"unit": "celsius"}')]}, "bad_arguments", {"validator": "required"}),
        ({"finish_reason": "stop"}, "finish_reason", {"finish_reason": "stop"}),
    ],
)  # fmt: skip
def test_c10_each_defect_of_a_forced_call_has_its_reason(
    changes: dict[str, Any], reason: str, evidence: dict[str, Any]
) -> None:
    """C10: markup in the text, text instead of a call, an unknown or another function,
    deltas that do not fit, arguments not JSON or off the schema (which keyword, where),
    and a finish reason that is not tool_calls: each its own reason, named in the evidence."""
    o = judge_call(tr(**changes))
    assert (o.status, o.reason) == (FAIL, reason), o
    assert {k: o.evidence.get(k) for k in evidence} == evidence, o.evidence


def test_c10_nested_object_checked() -> None:
    """C10: a nested object's required field and bounds are checked (book_table's party)."""
    args = json.dumps({"restaurant": "Casa Azul", "time": "19:30", "party": {"adults": 0}})
    o = judge_call(tr(expect=BOOKING, tool_calls=[ToolCall(index=0, id="c", name=BOOKING, arguments=args)]))  # fmt: skip
    assert (o.reason, o.evidence["path"], o.evidence["validator"]) == ("bad_arguments", "$.party.adults", "minimum")  # fmt: skip


def test_c10_transport_and_4xx_keep_their_meaning() -> None:
    """C10: a cut stream, a 429 and a 400 are never tool failures (transport / inconclusive)."""
    cut = judge_call(tr(done=False, transport_error=TransportCode.STREAM_CUT))
    assert cut.status is S.TRANSPORT
    assert judge_call(tr(http_status=429, tool_calls=[])).status is S.TRANSPORT
    assert judge_call(tr(http_status=400, tool_calls=[])).status is S.INCONCLUSIVE
    assert judge_call(tr(served_by="Other")).status is S.MISROUTED


def test_c10_none_result_and_triggers() -> None:
    """C10: a call under `none` violates it; a result used passes, one ignored or a second
    call fails; an `auto` reply is judged against its prompt."""
    assert judge_none(tr("none", tool_calls=[], text="Mild and sunny.", finish_reason="stop")).status is PASS  # fmt: skip
    violated = judge_none(tr("none"))
    assert (violated.status, violated.reason, violated.evidence["function"]) == (FAIL, "choice_none_violated", WEATHER)  # fmt: skip
    used = tr("result", tool_calls=[], text="It is 13 °C with light rain.", finish_reason="stop")
    assert judge_result(used).status is PASS
    ignored = tr("result", tool_calls=[], text="It is sunny and warm.", finish_reason="stop")
    assert (judge_result(ignored).reason, judge_result(ignored).evidence["what"]) == ("result_ignored", "no value of the result")  # fmt: skip
    assert judge_result(tr("result")).reason == "result_ignored"  # called again
    assert judge_trigger(tr("auto_need")).status is PASS
    missed = judge_trigger(tr("auto_need", tool_calls=[], text="I cannot check.", finish_reason="stop"))  # fmt: skip
    assert missed.reason == "trigger_missed"
    assert judge_trigger(tr("auto_plain")).reason == "trigger_spurious"
    assert judge_trigger(tr("auto_plain", tool_calls=[], text="56.", finish_reason="stop")).status is PASS  # fmt: skip


@pytest.mark.parametrize(
    "text", ["١٣ درجة", "อุณหภูมิ ๑๓ องศา", "気温は１３度", "13°C", "report WX-4471"]
)
def test_c10_result_values_in_any_script(text: str) -> None:
    """C10: the result's temperature counts in any script's digits; 113 or 1.3 do not."""
    assert uses_result(text)
    assert not uses_result("113 degrees") and not uses_result("1.3 degrees")


def _calls(bad: int, total: int) -> list[Transcript]:
    broken = ToolCall(index=0, id="c", name=WEATHER, arguments="{oops")
    return [
        tr(request_id=f"r{i}", tool_calls=[broken]) if i < bad else tr(request_id=f"r{i}")
        for i in range(total)
    ]


def test_c10_set_verdict_by_share_with_the_call_named() -> None:
    """C10: 6 of 12 bad calls fail the set with the failing calls described; 1 of 12 (or 2
    of 12) does not; the evidence says which call and what was wrong."""
    config = ProbeConfig()
    failed = judge_tools(ENDPOINT, _calls(6, 12), config)[0]
    assert (failed.status, failed.reason, failed.evidence["check"]) == (FAIL, "bad_arguments", "calls")  # fmt: skip
    assert failed.evidence["failed"][0]["request_id"] == "r0"
    text = evidence_text(failed)
    assert "6 of 12 forced calls failed" in text and "arguments not JSON" in text, text
    for bad in (1, 2):
        assert judge_tools(ENDPOINT, _calls(bad, 12), config)[0].status is PASS
    assert judge_tools(ENDPOINT, _calls(3, 12), config)[0].status is FAIL


def test_c10_checks_and_triggers_of_a_set() -> None:
    """C10: `none` and `result` fail when every one failed; a trigger rate above its bar is
    left to the peers (inconclusive, above_bar)."""
    config = ProbeConfig()
    ts = [
        *_calls(0, 12),
        *(tr("none", request_id=f"n{i}") for i in range(2)),
        *(tr("result", request_id=f"x{i}", tool_calls=[], text="13 °C", finish_reason="stop") for i in range(2)),
        *(tr("auto_need", request_id=f"a{i}", tool_calls=[], text="no", finish_reason="stop") for i in range(3)),
        *(tr("auto_plain", request_id=f"p{i}", tool_calls=[], text="56", finish_reason="stop") for i in range(3)),
    ]  # fmt: skip
    by = {o.evidence["check"]: o for o in judge_tools(ENDPOINT, ts, config)}
    assert (by["calls"].status, by["result"].status, by["trigger_spurious"].status) == (PASS, PASS, PASS)  # fmt: skip
    assert (by["none"].status, by["none"].reason) == (FAIL, "choice_none_violated")
    missed = by["trigger_missed"]
    assert (missed.status, missed.reason, missed.evidence["above_bar"]) == (S.INCONCLUSIVE, "trigger_missed", True)  # fmt: skip
    one_none = [*ts[:12], tr("none", request_id="n0"), tr("none", request_id="n1", tool_calls=[], text="Mild.", finish_reason="stop")]  # fmt: skip
    assert {o.evidence["check"]: o for o in judge_tools(ENDPOINT, one_none, config)}["none"].status is PASS  # fmt: skip
    text = tr("none", tool_calls=[], text="Mild.", finish_reason="stop")
    half = [*ts[:12], tr("none", request_id="n0"), tr("none", request_id="n1"), text, text]
    assert {o.evidence["check"]: o for o in judge_tools(ENDPOINT, half, config)}["none"].status is FAIL  # fmt: skip


def test_c10_endpoint_without_tools_is_unsupported_never_failed() -> None:
    """C10: an endpoint that does not advertise `tools` is `unsupported` and gets no request."""
    plain = ENDPOINT.model_copy(update={"supported_parameters": ("max_tokens",)})
    [o] = judge_tools(plain, _calls(12, 12), ProbeConfig())
    assert (o.status, o.reason) == (S.UNSUPPORTED, "not_advertised")
    from probes.probeset import probe_requests

    assert not [r for r in probe_requests(plain, "en", "en", ProbeConfig()) if r.tool]
    assert len([r for r in probe_requests(ENDPOINT, "en", "en", ProbeConfig()) if r.tool]) == 26


def test_c10_requests_follow_the_listing_and_the_fleet_rule() -> None:
    """C10: forced calls name the function (or `required` where only that passed), checks
    whose tool_choice did not pass are left out; the auto prompt that needs the tool names
    `get_weather` and the one that does not names no function (fleet/tools.py `turn`)."""
    probes = tool_probes("de", samples=4, checks=2, triggers=3)
    assert [p.probe for p in probes] == ["required"] * 4 + ["none"] * 2 + ["auto_need"] * 3 + ["auto_plain"] * 3 + ["result"] * 2  # fmt: skip
    assert probes[0].tool_choice == {"type": "function", "function": {"name": WEATHER}}
    assert probes[1].expect == BOOKING
    only_required = tool_probes("de", samples=2, checks=2, triggers=3, choices=("required", "auto"))
    assert only_required[0].tool_choice == "required" and only_required[0].expect is None
    assert "none" not in {p.probe for p in only_required}
    for loc in LOCALES:
        pack = tool_pack(loc)
        assert "get_weather" in pack["auto_need"]
        words = pack["auto_plain"].lower()
        assert not any(w in words for w in ("get_weather", "book_table", "weather", "table"))
    result = tool_probes("en", samples=0, checks=1, triggers=1)[-1]
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant", "tool"]
    assert {t["function"]["name"] for t in TOOLS} == {WEATHER, BOOKING}
