"""Pure tests of the client's wire parsing (C1, C2): SSE framing, error envelopes in both
metadata dialects, Retry-After, the endpoints listing, prompt packs and refusal data."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from probes.decode import StreamRecorder, parse_endpoints
from probes.language import check_language
from probes.prompts import LOCALES, UnknownLocaleError, prompt_for
from probes.refusal import match_refusal, refusal_patterns
from probes.types import Contract, OutcomeStatus, Transcript
from wire.errors import parse_error
from wire.retry_after import parse_retry_after
from wire.sse import Comment, Event, SSEParser
from wire.text import Scrubber

CORPUS = Path(__file__).parents[1] / "data" / "corpus" / "clean"


# ---- SSE -------------------------------------------------------------------------------------


def test_c3_sse_comments_and_events() -> None:
    """C3: keep-alive comments are Comment items, data lines dispatch on a blank line."""
    p = SSEParser(max_line_bytes=1_000_000)
    items = p.feed(b': OPENROUTER PROCESSING\n\ndata: {"a":1}\r\n\r\ndata: [DONE]\n\n')
    assert items == [Comment("OPENROUTER PROCESSING"), Event('{"a":1}'), Event("[DONE]")]
    assert p.malformed_lines == 0 and not p.pending


def test_c3_sse_malformed_counted_not_raised() -> None:
    """Bad input: lines without a field, unknown fields, invalid UTF-8 are counted, never raised."""
    p = SSEParser(max_line_bytes=100)
    items = p.feed(
        b"garbage line\nfoo: bar\ndata: \xff\xfeok\n\n" + b"x" * 250 + b"\ndata: fine\n\n"
    )
    assert p.malformed_lines == 3  # no colon, unknown field, overlong line
    assert p.non_utf8_lines == 1
    assert items == [Event("\ufffd\ufffdok"), Event("fine")]


# ---- recorder --------------------------------------------------------------------------------


def _t() -> Transcript:
    return Transcript(
        request_id="r",
        model_id="m/x",
        tag="p/fp8",
        pinned_provider="P",
        contract=Contract.LANGUAGE,
        http_status=200,
    )


def _chunk(content: str | None = None, **kw: Any) -> str:
    body: dict[str, Any] = {"id": "gen-1", "provider": kw.pop("provider", "P")}
    if content is not None or "finish" in kw:
        body["choices"] = [
            {
                "index": 0,
                "delta": {"content": content or ""},
                "finish_reason": kw.pop("finish", None),
            }
        ]
    body.update(kw)
    return json.dumps(body)


def test_c3_recorder_ttft_is_first_nonempty_content() -> None:
    """C3: role-only / empty deltas and usage chunks never set TTFT; the first text does."""
    rec = StreamRecorder(_t())
    rec.data(_chunk(""), 0.1)
    rec.data(_chunk("*She"), 0.5)
    rec.data(_chunk(" smiles*", finish="stop"), 0.6)
    rec.data(
        json.dumps({"id": "gen-1", "provider": "P", "choices": [], "usage": {"total_tokens": 9}}),
        0.7,
    )
    rec.data("[DONE]", 0.8)
    t = rec.finish()
    assert (t.ttft_s, t.text, t.finish_reason, t.done) == (0.5, "*She smiles*", "stop", True)
    assert t.usage == {"total_tokens": 9} and t.served_by == "P" and t.generation_id == "gen-1"


def test_c2_recorder_keeps_disagreeing_provider() -> None:
    """C2: if any chunk names another provider than the pin, served_by keeps that one."""
    rec = StreamRecorder(_t())
    rec.data(_chunk("a"), 0.1)
    rec.data(_chunk("b", provider="Other"), 0.2)
    rec.data(_chunk("c"), 0.3)
    assert rec.finish().misrouted


def test_c2_recorder_in_band_error_and_secret_scrub() -> None:
    """C2: the in-band error chunk is recorded as in_band; the key never survives in stored text."""
    rec = StreamRecorder(_t(), scrub=Scrubber("sk-SECRET"))
    rec.data(_chunk("hello sk-SECRET"), 0.1)
    err = {
        "code": 502,
        "message": "bad sk-SECRET",
        "metadata": {"error_type": "provider_unavailable"},
    }
    rec.data(_chunk("", finish="error", error=err), 0.2)
    rec.data("{not json", 0.3)
    t = rec.finish()
    assert t.error is not None and t.error.in_band and t.error.code == 502
    assert t.error.error_type == "provider_unavailable" and t.finish_reason == "error"
    assert "sk-SECRET" not in t.model_dump_json() and t.malformed_lines == 1


# ---- error envelopes, Retry-After, endpoints -------------------------------------------------


def test_c2_error_envelope_both_dialects() -> None:
    """C2: metadata in the current (error_type/provider_code) and older (provider_name/raw) dialects."""
    cur = parse_error(
        {
            "error": {
                "code": 429,
                "message": "slow",
                "metadata": {"error_type": "rate_limit_exceeded", "provider_code": "RL1"},
            }
        }
    )
    old = parse_error(
        {
            "error": {
                "code": 502,
                "message": "up",
                "metadata": {"provider_name": "DeepInfra", "raw": {"detail": "x"}},
            }
        }
    )
    mod = parse_error(
        {
            "error": {
                "code": 403,
                "message": "flagged",
                "metadata": {"reasons": ["violence"], "flagged_input": "..."},
            }
        }
    )
    assert cur is not None and (cur.code, cur.error_type, cur.provider_code) == (
        429,
        "rate_limit_exceeded",
        "RL1",
    )
    assert (
        old is not None
        and (old.code, old.provider_name) == (502, "DeepInfra")
        and "detail" in old.metadata["raw"]
    )
    assert mod is not None and mod.metadata["reasons"] == ["violence"]
    assert parse_error({"choices": []}) is None
    assert parse_error({"error": "plain"}, fallback_code=500) is not None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("Sun, 29 Nov 2026 23:00:10 GMT", 10.0),
        ("soon", None),
        (None, None),
        ("nan", None),
    ],
)
def test_c2_retry_after(value: str | None, expected: float | None) -> None:
    """R5/Q1: Retry-After as delta-seconds or HTTP date, relative to a given now."""
    assert parse_retry_after(value, datetime(2026, 11, 29, 23, 0, 0, tzinfo=UTC)) == expected


def _listing(**row: Any) -> dict[str, Any]:
    base = {"name": "X | m", "provider_name": "X", "tag": "x/fp8", "quantization": "fp8", "status": -2,
            "context_length": 1000, "pricing": {"prompt": "0.0000002", "completion": "0.0000004"},
            "supported_parameters": ["max_tokens", "response_format"], "uptime_last_30m": None,
            "latency_last_30m": {"p50": 250}}  # fmt: skip
    base.update(row)
    return {"data": {"id": "a/m", "endpoints": [base]}}


def test_c1_parse_endpoints_keeps_negative_status() -> None:
    """C1: endpoints become typed records; a negative status is kept visible, prices parsed."""
    (e,) = parse_endpoints(_listing(), "a/m")
    assert (e.tag, e.provider_name, e.status, e.usable) == ("x/fp8", "X", -2, False)
    assert (
        e.pricing.prompt == pytest.approx(2e-7)
        and e.latency_p50_ms == 250
        and e.supports_structured_output
    )


@pytest.mark.parametrize(
    "payload",
    [
        [],
        {"data": []},
        {"data": {}},
        _listing(tag=None),
        _listing(pricing={"prompt": "abc"}),
        _listing(supported_parameters="x"),
    ],
)
def test_c1_parse_endpoints_malformed(payload: Any) -> None:
    """C1: a payload not in the documented shape is a ValueError naming the problem."""
    with pytest.raises(ValueError):
        parse_endpoints(payload, "a/m")


# ---- prompt packs and refusal data -----------------------------------------------------------


@pytest.mark.parametrize("locale", LOCALES)
def test_c7_prompt_pack_in_its_language(locale: str) -> None:
    """C7: each locale's pack has all probes and its user turns are detected as that language."""
    for contract in Contract:
        messages = prompt_for(contract, locale)
        assert messages[0]["role"] == "system" and messages[-1]["role"] == "user"
    for contract in (Contract.LANGUAGE, Contract.START, Contract.REFUSAL):
        turn = prompt_for(contract, locale)[-1]["content"]
        assert turn.startswith("*"), "the user turn opens with an action"
        verdict = check_language(turn, locale)
        assert verdict.status is not OutcomeStatus.FAIL, (locale, contract, verdict.reason)
    assert "JSON" in prompt_for(Contract.STRUCTURED, locale)[-1]["content"]


def test_c7_unknown_locale_is_clear_error() -> None:
    """Bad input: an unknown locale names the known ones."""
    with pytest.raises(UnknownLocaleError, match="pt-BR"):
        prompt_for(Contract.LANGUAGE, "xx")


@pytest.mark.parametrize("locale", LOCALES)
def test_c4_refusal_patterns_no_false_positive_on_prompts(locale: str) -> None:
    """C4: every locale has compiled patterns; none fires on the locale's own role-play turns."""
    assert len(refusal_patterns(locale)) >= 3
    for contract in (Contract.LANGUAGE, Contract.START, Contract.REFUSAL):
        for message in prompt_for(contract, locale)[1:]:
            assert match_refusal(message["content"], locale) is None


def test_c4_refusal_patterns_no_false_positive_on_clean_corpus() -> None:
    """C4: 0 opening-refusal matches over the clean role-play corpus of tests/data (all locales there)."""
    files = sorted(CORPUS.glob("*.json"))
    assert files, "the clean corpus is missing"
    hits = []
    for file in files:
        locale = file.stem
        for text in json.loads(file.read_text(encoding="utf-8")):
            if match_refusal(text, locale) is not None:
                hits.append((locale, text[:60]))
    assert hits == []


# ---- client construction ---------------------------------------------------------------------


def test_c2_client_from_settings_hides_key() -> None:
    """C2/secrets: from_settings takes every probe knob; the key never shows in repr."""
    from ground.settings import ProbeConfig, Settings
    from probes.client import ProbeClient

    settings = Settings(
        _env_file=None,
        base_url="http://127.0.0.1:9/api/v1/",
        api_key="sk-hidden-1",
        probe={"ttft_threshold_s": 4.0, "max_bytes": 5000},
    )
    client = ProbeClient.from_settings(settings)
    assert client.base_url == "http://127.0.0.1:9/api/v1" and client.config is settings.probe
    assert (client.config.ttft_threshold_s, client.config.max_bytes) == (4.0, 5000)
    assert "sk-hidden-1" not in repr(client) and "api_key=<set>" in repr(client)
    with pytest.raises(ValueError, match="ttft_threshold_s"):
        ProbeConfig(ttft_threshold_s=0)
    with pytest.raises(ValueError, match="http"):
        ProbeClient("ftp://x", None)


def test_c2_request_body_pins_exactly() -> None:
    """C2: the request body pins one endpoint without fallbacks; require_parameters only with response_format."""
    from probes.client import ProbeClient
    from probes.contracts import RESPONSE_FORMAT
    from probes.types import Endpoint

    client = ProbeClient("http://127.0.0.1:9", None)
    e = Endpoint(model_id="a/m", tag="x/fp8", provider_name="X")
    plain = client.request_body(e, [{"role": "user", "content": "hi"}])
    assert (
        plain["provider"] == {"only": ["x/fp8"], "allow_fallbacks": False}
        and plain["stream"] is True
    )
    assert "temperature" not in plain and "response_format" not in plain
    rf = client.request_body(e, [], response_format=RESPONSE_FORMAT, temperature=0.2)
    assert rf["provider"] == {
        "only": ["x/fp8"],
        "allow_fallbacks": False,
        "require_parameters": True,
    }
    assert rf["temperature"] == 0.2 and rf["response_format"] == RESPONSE_FORMAT
