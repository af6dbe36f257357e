"""Issue 22's evidence in the round's artifacts (O3), pure: the round table's few words, the
decisions' and status artifact's lines and the failing transcripts of a tools failure, from
the judges' own outcomes on hand-made replies."""

from __future__ import annotations

from flows.render import evidence_lines, outcome_rows
from flows.transcripts import failing_transcripts_markdown
from ground.settings import ProbeConfig
from probes.streams import judge_stream
from probes.tool_verdicts import judge_tools
from probes.types import Contract, Endpoint, ToolCall, Transcript
from quarantine.verdicts import round_verdict
from wire.text import Scrubber

KEY = "sk-or-v1-0123456789abcdef0123456789abcdef"
ENDPOINT = Endpoint(
    model_id="meta-llama/llama-3.3-70b-instruct", tag="bad/fp8", provider_name="Bad",
    supported_parameters=("tools", "tool_choice"),
)  # fmt: skip


def _call(i: int, *, text: str = "", calls: list[ToolCall] | None = None) -> Transcript:
    return Transcript(
        request_id=f"call-{i}", model_id=ENDPOINT.model_id, tag="bad/fp8", pinned_provider="Bad",
        served_by="Bad", contract=Contract.TOOLS, probe="required", expect="get_weather",
        http_status=200, done=True, text=text, tool_calls=calls or [],
        finish_reason="tool_calls" if calls else "stop", locale="en",
    )  # fmt: skip


def _tool_round() -> tuple[list, list[Transcript]]:
    good = ToolCall(index=0, id="c", name="get_weather", arguments='{"city": "Lisbon", "unit": "celsius"}')  # fmt: skip
    leaked = f'<tool_call>{{"name": "get_weather", "arguments": {{"key": "{KEY}"}}}}</tool_call>'
    ts = [_call(i, text=leaked) if i < 6 else _call(i, calls=[good]) for i in range(12)]
    return judge_tools(ENDPOINT, ts, ProbeConfig()), ts


def test_o3_tools_failure_in_words_in_the_table_decisions_and_transcripts() -> None:
    """A tools failure reads `6/12 bad calls` in the round table, names the marker and the
    function in the decisions and status lines, and the transcripts artifact shows exactly
    the failing calls, key scrubbed."""
    outcomes, ts = _tool_round()
    [row] = [r for r in outcome_rows({"bad/fp8": outcomes}, {}, {}) if r["outcome"] == "fail"]
    assert (row["contract"], row["evidence"]) == ("tools", "6/12 bad calls")
    [line] = evidence_lines(outcomes)
    assert line.startswith("tools `as_text`: 6 of 12 forced calls failed")
    assert "markup `<tool_call>`" in line and "call get_weather" in line
    verdict = round_verdict("bad/fp8", outcomes)
    assert verdict.reasons == ("tools:as_text",)
    md = failing_transcripts_markdown("r", {"bad/fp8": verdict}, {"bad/fp8": outcomes}, {"bad/fp8": ts}, Scrubber(KEY))  # fmt: skip
    assert md is not None and md.count("#### tools (required)") == 6
    assert "call-0" in md and "call-11" not in md and KEY[:16] not in md


def test_o3_stream_failure_in_words() -> None:
    """A substituted model is named with the model asked for, in the table and the lines."""
    ts = [
        Transcript(
            request_id=f"s{i}",
            model_id=ENDPOINT.model_id,
            tag="bad/fp8",
            pinned_provider="Bad",
            served_by="Bad",
            served_model="meta-llama/llama-3.1-8b-instruct",
            contract=Contract.START,
            http_status=200,
            done=True,
            text="*She smiles.* Hello there, traveller. " * 3,
            ttft_s=0.3,
            last_content_s=1.2,
            content_chunks=30,
            first_chunk_chars=5,
        )
        for i in range(6)
    ]
    outcomes = judge_stream(ENDPOINT, ts, ProbeConfig())
    rows = [r for r in outcome_rows({"bad/fp8": outcomes}, {}, {}) if r["outcome"] == "fail"]
    assert [r["evidence"] for r in rows] == ["served meta-llama/llama-3.1-8b-in…"]
    [line] = evidence_lines(outcomes)
    assert (
        "6 of 6 replies named `meta-llama/llama-3.1-8b-instruct`, asked `meta-llama/llama-3.3-70b-instruct`"
        in line
    )
