"""Wire fidelity of the fleet (issue 2 §3): the official openai client, raw SSE
framing byte-level, error envelopes and Retry-After."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.fixtures.fleet import FleetHandle

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
    return httpx.post(
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
        extra_body=_pin("deepinfra/fp8"),  # type: ignore[arg-type]
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
    )  # type: ignore[arg-type]
    assert result.choices[0].message.content and result.choices[0].message.content.startswith("*")
    assert result.model_extra and result.model_extra["provider"] == "Together"
    assert result.usage is not None and result.usage.completion_tokens > 0


def test_sse_framing_bytes(fleet: FleetHandle) -> None:
    """Raw stream: keep-alive comment first, `data: ` events separated by blank lines, usage then `[DONE]`."""
    body = {"model": LLAMA, "messages": PROMPT, "stream": True, **_pin("fireworks/fp8")}
    with httpx.stream(
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
    r = httpx.post(
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
