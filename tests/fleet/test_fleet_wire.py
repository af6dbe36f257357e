"""Wire fidelity of the fleet (issue 2 §3): the official openai client, raw SSE
framing byte-level, error envelopes and Retry-After."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.fixtures.fleet import FleetHandle, parse_sse

LLAMA = "meta-llama/llama-3.3-70b-instruct"
PROMPT = [
    {
        "role": "user",
        "content": "Continue the scene: she pushes open the tavern door and looks at me.",
    }
]


def _pin(tag: str) -> dict[str, Any]:
    return {"provider": {"only": [tag], "allow_fallbacks": False}}


def _post(fleet: FleetHandle, body: dict[str, Any], key: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key or fleet.key}"}
    return fleet.http.post(
        f"{fleet.base_url}/chat/completions", json=body, headers=headers, timeout=30.0
    )


def test_c2_openai_client_streams_with_usage_and_provider(fleet: FleetHandle) -> None:
    """The official openai client streams a pinned reply, sees `provider` on every chunk and the usage chunk."""
    client = openai.OpenAI(base_url=fleet.base_url, api_key=fleet.key, max_retries=0)
    stream = client.chat.completions.create(
        model=LLAMA,
        messages=PROMPT,
        stream=True,
        stream_options={"include_usage": True},
        extra_body=_pin("deepinfra/fp8"),
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("*")
    assert {getattr(c, "provider", None) for c in chunks} == {"DeepInfra"}
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (
        chunks[-1].usage.total_tokens
        == chunks[-1].usage.prompt_tokens + chunks[-1].usage.completion_tokens
    )
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_c2_openai_client_non_stream(fleet: FleetHandle) -> None:
    """A non-streamed completion parses with the openai client and names its provider."""
    client = openai.OpenAI(base_url=fleet.base_url, api_key=fleet.key, max_retries=0)
    result = client.chat.completions.create(
        model=LLAMA, messages=PROMPT, extra_body=_pin("together/fp8")
    )
    assert result.choices[0].message.content and result.choices[0].message.content.startswith("*")
    assert result.model_extra and result.model_extra["provider"] == "Together"
    assert result.usage is not None and result.usage.completion_tokens > 0


def test_sse_framing_bytes(fleet: FleetHandle) -> None:
    """Raw stream: keep-alive comment first, `data: ` events separated by blank lines, usage then `[DONE]`."""
    body = {"model": LLAMA, "messages": PROMPT, "stream": True, **_pin("fireworks/fp8")}
    with fleet.http.stream(
        "POST",
        f"{fleet.base_url}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {fleet.key}"},
        timeout=30,
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = b"".join(r.iter_bytes())
    assert raw.startswith(b": OPENROUTER PROCESSING\n\n")
    assert raw.endswith(b"data: [DONE]\n\n")
    events = [e for e in raw.split(b"\n\n") if e]
    assert all(e.startswith((b"data: ", b": ")) for e in events)
    payloads = [json.loads(e[6:]) for e in events if e.startswith(b"data: {")]
    assert payloads[-1]["choices"] == [] and payloads[-1]["usage"]["cost"] > 0
    assert all(p["provider"] == "Fireworks" for p in payloads)


@pytest.mark.parametrize(
    ("key", "message"), [(None, "No auth credentials found"), ("wrong", "User not found.")]
)
def test_auth_401_envelope(fleet: FleetHandle, key: str | None, message: str) -> None:
    """Missing or wrong bearer key: 401 with the error envelope; the server keeps serving."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    r = fleet.http.post(
        f"{fleet.base_url}/chat/completions",
        json={"model": LLAMA, "messages": PROMPT},
        headers=headers,
    )
    assert r.status_code == 401
    assert r.json() == {
        "error": {"code": 401, "message": message, "metadata": {"error_type": "authentication"}}
    }
    assert (
        _post(fleet, {"model": LLAMA, "messages": PROMPT, **_pin("deepinfra/fp8")}).status_code
        == 200
    )


def _scenario(*endpoints: dict[str, Any], time_scale: float = 0.01) -> dict[str, Any]:
    return {
        "name": "wire-test",
        "time_scale": time_scale,
        "models": [{"id": "test/model", "endpoints": list(endpoints)}],
    }


def _ep(tag: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "tag": tag,
        "provider_name": name,
        "timing": {"ttft_s": 0.2, "tokens_per_s": 100},
        **extra,
    }


def _body(tag: str, stream: bool = True) -> dict[str, Any]:
    return {"model": "test/model", "messages": PROMPT, "stream": stream, **_pin(tag)}


def test_retry_after_on_429_and_503(fleet: FleetHandle) -> None:
    """429 and 503 pre-token errors carry `Retry-After` and the envelope with `metadata.error_type`."""
    fleet.load(
        _scenario(
            _ep(
                "a/x",
                "A",
                faults=[{"kind": "http_error", "status": 429, "first_n": 1, "retry_after_s": 3}],
            ),
            _ep(
                "b/x",
                "B",
                faults=[{"kind": "http_error", "status": 503, "first_n": 1, "retry_after_s": 2}],
            ),
        )
    )
    r = fleet.chat(_body("a/x"))
    assert r.status_code == 429 and r.headers["retry-after"] == "3"
    assert r.json()["error"]["code"] == 429
    assert r.json()["error"]["metadata"]["error_type"] == "rate_limit_exceeded"
    r = fleet.chat(_body("b/x"))
    assert r.status_code == 503 and r.headers["retry-after"] == "2"
    assert r.json()["error"]["metadata"]["error_type"] == "provider_overloaded"
    assert fleet.chat(_body("a/x")).status_code == 200, "first_n=1: the second request is served"


def test_midstream_error_chunk_bytes(fleet: FleetHandle) -> None:
    """After tokens, an error arrives in-band: HTTP 200, an error chunk with finish_reason `error`, no `[DONE]`."""
    fleet.load(
        _scenario(_ep("a/x", "A", faults=[{"kind": "midstream_error", "first_n": 1, "code": 502}]))
    )
    r = fleet.chat(_body("a/x"))
    assert r.status_code == 200
    result = parse_sse(r.content)
    assert result.text and not result.done
    last = result.payloads[-1]
    assert last["error"] == {
        "code": 502,
        "message": "Provider returned error",
        "metadata": {"error_type": "provider_unavailable", "provider_name": "A"},
    }
    assert last["choices"][0]["finish_reason"] == "error" and last["provider"] == "A"
    assert r.content.endswith(b"\n\n") and b"[DONE]" not in r.content


def test_stream_cut_without_done(fleet: FleetHandle) -> None:
    """A cut stream ends after some tokens with neither usage nor `[DONE]`."""
    fleet.load(_scenario(_ep("a/x", "A", faults=[{"kind": "stream_cut", "first_n": 1}])))
    result = parse_sse(fleet.chat(_body("a/x")).content)
    assert result.text and not result.done
    assert all(p["choices"] for p in result.payloads), "no usage chunk"
    assert fleet.requests()[-1]["outcome"] == "cut"


def test_reset_before_headers(fleet: FleetHandle) -> None:
    """A reset closes the connection before any response byte (a transport error), then the host serves again."""
    fleet.load(_scenario(_ep("a/x", "A", faults=[{"kind": "reset", "first_n": 1}])))
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        fleet.chat(_body("a/x"))
    assert fleet.chat(_body("a/x")).status_code == 200


def test_c3_slow_first_token_sends_keepalives(fleet: FleetHandle) -> None:
    """A slow host keeps the stream alive with `: OPENROUTER PROCESSING` comments until its first token."""
    fleet.load(
        _scenario(
            _ep("a/x", "A", faults=[{"kind": "slow_first_token", "rate": 1.0, "ttft_s": 12}]),
            time_scale=0.05,
        )
    )
    raw = fleet.chat(_body("a/x")).content
    head = raw[: raw.index(b"data: ")]
    assert head == b": OPENROUTER PROCESSING\n\n" * head.count(b":")
    assert head.count(b":") >= 5, (
        "about one keep-alive per scaled second over 12 s (generous under load)"
    )
    assert parse_sse(raw).done


def test_timeouts_408_and_504_envelopes(fleet: FleetHandle) -> None:
    """defect-zoo's timeout host answers 408 or 504 with `error_type` `timeout`."""
    fleet.load("defect-zoo", time_scale=0.01)
    statuses = set()
    for _ in range(8):
        r = fleet.chat({"model": LLAMA, "messages": PROMPT, **_pin("timeout/fp8")})
        assert r.json()["error"]["metadata"]["error_type"] == "timeout"
        statuses.add(r.status_code)
    assert statuses == {408, 504}


def test_openai_client_sees_rate_limit_with_retry_after(fleet: FleetHandle) -> None:
    """The openai client maps the fleet's 429 to RateLimitError and exposes `Retry-After`."""
    fleet.load("defect-zoo", time_scale=0.01)
    client = openai.OpenAI(base_url=fleet.base_url, api_key=fleet.key, max_retries=0)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(
            model=LLAMA, messages=PROMPT, extra_body=_pin("firstfail/fp8")
        )
    assert info.value.response.headers["retry-after"] == "1"
    assert info.value.body == {
        "code": 429,
        "message": "Rate limit exceeded: too many requests to this provider",
        "metadata": {"error_type": "rate_limit_exceeded"},
    }
    result = client.chat.completions.create(
        model=LLAMA, messages=PROMPT, extra_body=_pin("firstfail/fp8")
    )
    assert result.choices[0].finish_reason == "stop"


def test_unknown_route_and_method_get_envelopes(fleet: FleetHandle) -> None:
    """Unknown paths are a 404 envelope, a wrong method a 405 envelope."""
    r = fleet.http.get(f"{fleet.base_url}/nothing/here")
    assert r.status_code == 404 and r.json()["error"]["code"] == 404
    r = fleet.http.get(f"{fleet.base_url}/chat/completions")
    assert r.status_code == 405 and r.json()["error"]["code"] == 405
