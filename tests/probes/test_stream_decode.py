"""The stream recorder's new facts (probes/decode.py, probes/tool_deltas.py): tool-call
deltas assembled per index and what does not fit, reasoning fields never content, chunk
times, the reply's model; the listing's new fields (C10, C11, C12)."""

from __future__ import annotations

import json
from typing import Any

from probes.decode import StreamRecorder, parse_endpoints
from probes.tool_deltas import MAX_ARGUMENT_CHARS
from probes.types import Contract, Transcript
from wire.text import Scrubber


def _recorder(secret: str | None = None) -> StreamRecorder:
    t = Transcript(
        request_id="r", model_id="m/x", tag="h/fp8", pinned_provider="H", contract=Contract.TOOLS
    )
    return StreamRecorder(t, scrub=Scrubber(secret))


def _chunk(delta: dict[str, Any], finish: str | None = None, **top: Any) -> str:
    body = {"id": "gen-1", "model": "m/x", "provider": "H", **top}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return json.dumps(body)


def _call(index: Any, *, id: str | None = None, name: str | None = None, args: str | None = None) -> dict[str, Any]:  # fmt: skip
    entry: dict[str, Any] = {"index": index}
    if id is not None:
        entry.update(id=id, type="function")
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    entry["function"] = fn
    return entry


def test_c10_streamed_call_assembles_and_counts_as_output() -> None:
    """C10: a header delta then argument pieces under one index give one call; its first
    delta is the stream's first output (TTFT of a call)."""
    r = _recorder()
    r.data(_chunk({"role": "assistant", "content": None, "tool_calls": [_call(0, id="call_1", name="get_weather", args="")]}), 0.2)  # fmt: skip
    for i, piece in enumerate(['{"city": ', '"Lisbon", "unit"', ': "celsius"}']):
        r.data(_chunk({"tool_calls": [_call(0, args=piece)]}), 0.3 + i / 10)
    r.data(_chunk({}, "tool_calls"), 0.6)
    r.data("[DONE]", 0.61)
    t = r.finish()
    assert [(c.index, c.id, c.name) for c in t.tool_calls] == [(0, "call_1", "get_weather")]
    assert json.loads(t.tool_calls[0].arguments) == {"city": "Lisbon", "unit": "celsius"}
    assert t.tool_delta_problems == [] and t.finish_reason == "tool_calls"
    assert t.first_tool_s == 0.2 and t.first_token_s == 0.2 and t.ttft_s is None
    assert t.served_model == "m/x" and t.text == ""


def test_c10_deltas_that_do_not_fit_are_named() -> None:
    """C10: a delta without index, an id changed mid-call, arguments before the call began,
    and indices with a gap are each recorded in words."""
    r = _recorder()
    r.data(_chunk({"tool_calls": [_call(0, id="a", name="get_weather", args="{")]}), 0.1)
    r.data(_chunk({"tool_calls": [{"function": {"arguments": "}"}}]}), 0.2)
    r.data(_chunk({"tool_calls": [_call(0, id="b", args="")]}), 0.3)
    r.data(_chunk({"tool_calls": [_call(2, args='{"x": 1}')]}), 0.4)
    t = r.finish()
    joined = " | ".join(t.tool_delta_problems)
    assert "without an integer index" in joined and "changed id" in joined
    assert "before its call began" in joined and "do not run 0, 1, 2" in joined


def test_c10_non_streamed_message_calls() -> None:
    """C10: a non-streamed body's `message.tool_calls` (no index) is read as the calls."""
    r = _recorder()
    body = {
        "id": "gen-2", "model": "m/x", "provider": "H",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "book_table", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "x"}}},
        ]}}],
    }  # fmt: skip
    r.chunk(body, 0.5)
    t = r.finish()
    assert [c.name for c in t.tool_calls] == ["book_table", "get_weather"]
    assert t.tool_delta_problems == ["arguments of index 1 sent as dict"]


def test_c11_reasoning_fields_are_not_content() -> None:
    """C11: `delta.reasoning` and `reasoning_details` are counted (once when both carry the
    same text), never content; they start the stream (first output) but not the TTFT."""
    r = _recorder()
    detail = [{"type": "reasoning.text", "text": "Let me think.", "format": "unknown", "index": 0}]
    r.data(_chunk({"role": "assistant", "content": "", "reasoning": "Let me think.", "reasoning_details": detail}), 0.1)  # fmt: skip
    r.data(_chunk({"content": "", "reasoning_details": [{"type": "reasoning.encrypted", "data": "xyz"}]}), 0.15)  # fmt: skip
    r.data(_chunk({"content": "*She smiles.*"}), 0.5)
    r.data(_chunk({"content": " Hello."}, "stop"), 0.7)
    t = r.finish()
    assert t.text == "*She smiles.* Hello." and t.reasoning_chars == len("Let me think.") + 1
    assert (t.first_reasoning_s, t.ttft_s, t.first_token_s) == (0.1, 0.5, 0.1)
    assert (t.last_content_s, t.content_chunks, t.first_chunk_chars) == (0.7, 2, 13)


def test_c12_served_model_kept_scrubbed() -> None:
    """C12: the first `model` a chunk names is kept, scrubbed of the key like every string."""
    r = _recorder("sk-or-secret-key-123456")
    r.data(_chunk({"content": "hi"}, model="other/model sk-or-secret-key-123456"), 0.1)
    t = r.finish()
    assert t.served_model is not None and "secret-key" not in t.served_model


def test_c10_c12_listing_fields() -> None:
    """C10/C12: `supports_tool_choice` says which tool_choice values passed; a missing one
    means unknown (all tried); `throughput_last_30m.p50` is kept (null accepted)."""
    row = {
        "tag": "a/fp8", "provider_name": "A", "supported_parameters": ["tools", "tool_choice"],
        "supports_tool_choice": {"auto": True, "none": False, "required": True, "function": False},
        "throughput_last_30m": {"p50": 45.2, "p75": 38.5},
    }  # fmt: skip
    plain = {"tag": "b/fp8", "provider_name": "B", "throughput_last_30m": None}
    a, b = parse_endpoints({"data": {"id": "m/x", "endpoints": [row, plain]}}, "m/x")
    assert a.tool_choices == ("auto", "required") and a.throughput_p50_tps == 45.2
    assert a.supports_tools and a.supports_tool_choice("required") and not a.supports_tool_choice("none")  # fmt: skip
    assert b.tool_choices is None and b.supports_tool_choice("none") and b.throughput_p50_tps is None  # fmt: skip
    assert not b.supports_tools


def test_c11_reasoning_disabled_and_its_tokens_are_evidence_only() -> None:
    """C11: with `disable_reasoning` the probes of an endpoint advertising `reasoning` ask
    for none (and only those); reasoning tokens a reply still reports are evidence on the
    start outcome, never a failure."""
    from ground.settings import ProbeConfig
    from probes.client import ProbeClient
    from probes.probeset import reasoning_evidence
    from probes.types import Endpoint

    thinker = Endpoint(model_id="m/x", tag="t/bf16", provider_name="T", supported_parameters=("reasoning",))  # fmt: skip
    plain = thinker.model_copy(update={"supported_parameters": ()})
    on = ProbeClient("http://127.0.0.1:9/api/v1", "k", ProbeConfig(disable_reasoning=True))
    off = ProbeClient("http://127.0.0.1:9/api/v1", "k", ProbeConfig())
    assert on.request_body(thinker, [])["reasoning"] == {"enabled": False}
    assert "reasoning" not in on.request_body(plain, []) and "reasoning" not in off.request_body(thinker, [])  # fmt: skip
    base = {"request_id": "r", "model_id": "m/x", "tag": "t/bf16", "pinned_provider": "T", "contract": Contract.START}  # fmt: skip
    usage = {"completion_tokens": 50, "completion_tokens_details": {"reasoning_tokens": 12}}
    ts = [
        Transcript(**base, reasoning_disabled=True, usage=usage),
        Transcript(**base, usage=usage, reasoning_chars=40),
    ]
    assert reasoning_evidence(ts) == {"streamed_chars": 40, "tokens_while_disabled": 12}


def test_issue31_arguments_over_the_cap_are_named_never_judged_cut() -> None:
    """Arguments longer than `MAX_ARGUMENT_CHARS` are kept cut, and the cut is recorded as a
    problem (the reply fails as inconsistent deltas, not as the provider's bad JSON); at the
    cap itself nothing is recorded."""
    for size, problems in ((MAX_ARGUMENT_CHARS, []), (MAX_ARGUMENT_CHARS + 1, ["over"])):
        r = _recorder()
        args = '{"city": "' + "x" * (size - 12) + '"}'
        assert len(args) == size
        r.data(_chunk({"tool_calls": [_call(0, id="c", name="get_weather", args="")]}), 0.1)
        for i in range(0, size, 5_000):
            r.data(_chunk({"tool_calls": [_call(0, args=args[i : i + 5_000])]}), 0.2)
        t = r.finish()
        found = [p for p in t.tool_delta_problems if "over" in p]
        assert len(found) == len(problems), t.tool_delta_problems
        assert all(f"index 0 over {MAX_ARGUMENT_CHARS} characters" in p for p in found), found
