"""Provider routing semantics of the fleet (issue 2 §2/§3, SPEC C2): `only`,
`ignore`, `order`, `allow_fallbacks`, `require_parameters`, and the 404 when
nothing is left."""

from __future__ import annotations

from typing import Any

from tests.fixtures.fleet import FleetHandle

LLAMA = "meta-llama/llama-3.3-70b-instruct"
PROMPT = [
    {"role": "user", "content": "Continue the scene: the storm rattles the shutters while we wait."}
]
SCHEMA = {
    "type": "object",
    "properties": {"mood": {"type": "string"}},
    "required": ["mood"],
    "additionalProperties": False,
}
NO_PROVIDER = {
    "error": {
        "code": 404,
        "message": "No allowed providers are available for the selected model",
        "metadata": {"error_type": "not_found"},
    }
}


def _body(provider: dict[str, Any], model: str = LLAMA, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": PROMPT, "provider": provider, **extra}


def _two_hosts(first_faults: list[dict[str, Any]]) -> dict[str, Any]:
    timing = {"ttft_s": 0.1, "tokens_per_s": 200}
    return {
        "name": "pin-test",
        "time_scale": 0.01,
        "models": [
            {
                "id": "test/model",
                "endpoints": [
                    {
                        "tag": "first/fp8",
                        "provider_name": "First",
                        "timing": timing,
                        "faults": first_faults,
                        "pricing": {"prompt": "0.0000001"},
                    },
                    {"tag": "second/fp8", "provider_name": "Second", "timing": timing},
                ],
            }
        ],
    }


def test_c2_only_without_fallbacks_always_serves_the_pinned_host(fleet: FleetHandle) -> None:
    """`only` + `allow_fallbacks: false`: every response comes from the pinned endpoint and names it."""
    for tag, name in [
        ("nebius/fp8", "Nebius AI Studio"),
        ("groq/fp16", "Groq"),
        ("startcorrupt/fp8", "StartCorrupt"),
    ]:
        for _ in range(3):
            r = fleet.chat(_body({"only": [tag], "allow_fallbacks": False}))
            assert r.status_code == 200 and r.json()["provider"] == name
    assert [e["tag"] for e in fleet.requests()] == ["nebius/fp8"] * 3 + ["groq/fp16"] * 3 + [
        "startcorrupt/fp8"
    ] * 3


def test_c2_pinned_error_comes_back_and_nobody_else_answers(fleet: FleetHandle) -> None:
    """A pinned host that errors before the first token returns its error; no other host is tried."""
    fleet.load(_two_hosts([{"kind": "http_error", "status": 502, "first_n": 2}]))
    for _ in range(2):
        r = fleet.chat(_body({"only": ["first/fp8"], "allow_fallbacks": False}, model="test/model"))
        assert (
            r.status_code == 502
            and r.json()["error"]["metadata"]["error_type"] == "provider_unavailable"
        )
    log = fleet.requests()
    assert [[a["tag"] for a in e["attempts"]] for e in log] == [["first/fp8"], ["first/fp8"]]


def test_order_with_fallbacks_falls_through_on_pre_token_errors(fleet: FleetHandle) -> None:
    """`order` with fallbacks: a pre-token error (HTTP or reset) is silently replaced by the next candidate."""
    fleet.load(
        _two_hosts(
            [
                {"kind": "http_error", "status": 429, "first_n": 1, "retry_after_s": 1},
                {"kind": "reset", "rate": 1.0},
            ]
        )
    )
    for _ in range(3):
        r = fleet.chat(
            _body({"order": ["first/fp8", "second/fp8"]}, model="test/model", stream=True)
        )
        assert r.status_code == 200 and b'"provider":"Second"' in r.content
    attempts = [
        [(a["tag"], a["status"], a["reset"]) for a in e["attempts"]] for e in fleet.requests()
    ]
    assert attempts[0] == [("first/fp8", 429, False), ("second/fp8", 200, False)]
    assert attempts[1] == attempts[2] == [("first/fp8", 502, True), ("second/fp8", 200, False)]


def test_order_without_fallbacks_returns_the_error(fleet: FleetHandle) -> None:
    """`order` with `allow_fallbacks: false` only tries the first ordered endpoint."""
    fleet.load(_two_hosts([{"kind": "http_error", "status": 503, "first_n": 1}]))
    r = fleet.chat(_body({"order": ["first"], "allow_fallbacks": False}, model="test/model"))
    assert r.status_code == 503
    r = fleet.chat(_body({"order": ["second"], "allow_fallbacks": False}, model="test/model"))
    assert r.json()["provider"] == "Second"


def test_ignore_excludes_endpoints(fleet: FleetHandle) -> None:
    """`ignore` (full or base slug) removes endpoints from the candidates."""
    fleet.load(_two_hosts([]))
    assert fleet.chat(_body({}, model="test/model")).json()["provider"] == "First", (
        "cheapest first by default"
    )
    for slug in ("first/fp8", "first", "First"):
        assert (
            fleet.chat(_body({"ignore": [slug]}, model="test/model")).json()["provider"] == "Second"
        )
    assert (
        fleet.chat(_body({"ignore": ["first", "second"]}, model="test/model")).json() == NO_PROVIDER
    )


def test_base_slug_matches_every_endpoint_of_the_provider(fleet: FleetHandle) -> None:
    """`only: ["google-vertex"]` allows both Google Vertex endpoints; `ignore` of one full slug leaves the other."""
    body = _body(
        {"only": ["google-vertex"], "ignore": ["google-vertex/global"]},
        model="google/gemini-2.0-flash",
    )
    assert fleet.chat(body).json()["provider"] == "Google Vertex"
    body = _body(
        {"only": ["google-vertex"], "order": ["google-vertex/global"]},
        model="google/gemini-2.0-flash",
    )
    assert fleet.chat(body).json()["provider"] == "Google Vertex (Global)"


def test_c6_require_parameters_filters_endpoints_without_structured_output(
    fleet: FleetHandle,
) -> None:
    """`require_parameters` drops an endpoint that does not advertise `response_format`; 404 if none is left."""
    rf = {"type": "json_schema", "json_schema": {"name": "p", "strict": True, "schema": SCHEMA}}
    r = fleet.chat(
        _body(
            {
                "only": ["nostruct/bf16", "deepinfra/fp8"],
                "require_parameters": True,
                "order": ["nostruct/bf16"],
            },
            response_format=rf,
        )
    )
    assert r.json()["provider"] == "DeepInfra"
    r = fleet.chat(
        _body(
            {"only": ["nostruct/bf16"], "allow_fallbacks": False, "require_parameters": True},
            response_format=rf,
        )
    )
    assert r.status_code == 404 and r.json() == NO_PROVIDER
    r = fleet.chat(_body({"only": ["nostruct/bf16"], "allow_fallbacks": False}, response_format=rf))
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"].startswith("*"), (
        "without require_parameters it ignores the format"
    )


def test_404_when_only_matches_nothing(fleet: FleetHandle) -> None:
    """An `only` list naming no endpoint of the model gives the documented 404 envelope."""
    r = fleet.chat(_body({"only": ["nosuchhost/fp8"], "allow_fallbacks": False}))
    assert r.status_code == 404 and r.json() == NO_PROVIDER


def test_c2_misroute_reports_another_provider(fleet: FleetHandle) -> None:
    """A misrouting host answers a pinned request under a different `provider` name (stream and not)."""
    fleet.load("defect-zoo", time_scale=0.01)
    r = fleet.chat(_body({"only": ["misroute/fp8"], "allow_fallbacks": False}))
    assert r.json()["provider"] == "SomeoneElse"
    r = fleet.chat(_body({"only": ["misroute/fp8"], "allow_fallbacks": False}, stream=True))
    assert b'"provider":"SomeoneElse"' in r.content and b'"provider":"Misroute"' not in r.content
