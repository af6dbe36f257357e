"""fleet/app.py: the key check through wire.auth (as tolerant as before, the same two
401 messages) and the request-body errors answered and logged through one table, over
real HTTP to the fleet subprocess."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleet.app import CHAT_BODY_ERRORS, SCENARIO_BODY_ERRORS, BodyError, body_error
from fleet.request import RequestError
from fleet.scenario import ScenarioError
from fleet.schema_check import SchemaProblem
from tests.fixtures.fleet import FleetHandle

LLAMA = "meta-llama/llama-3.3-70b-instruct"
PROMPT = [{"role": "user", "content": "Continue the scene: the lantern flickers in the cellar."}]
PIN = {"only": ["deepinfra/fp8"], "allow_fallbacks": False}
BODY = {"model": LLAMA, "messages": PROMPT, "provider": PIN}


def _post(fleet: FleetHandle, content: bytes, authorization: str | None) -> Any:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    return fleet.http.post(f"{fleet.base_url}/chat/completions", content=content, headers=headers)


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "No auth credentials found"),
        ("Bearer", "No auth credentials found"),
        ("Basic ZmxlZXQ=", "No auth credentials found"),
        ("Bearer wrong-key", "User not found."),
        ("Bearer \tstill-wrong", "User not found."),
    ],
)
def test_a_missing_or_unknown_key_is_401_and_logged_without_its_body(
    fleet: FleetHandle, authorization: str | None, message: str
) -> None:
    """No bearer token and a wrong one get OpenRouter's two 401 messages; the log has no body."""
    r = _post(fleet, json.dumps(BODY).encode(), authorization)
    assert r.status_code == 401
    assert r.json()["error"] == {
        "code": 401,
        "message": message,
        "metadata": {"error_type": "authentication"},
    }
    [entry] = fleet.requests()
    assert (entry["status"], entry["body"], entry["model"]) == (401, None, None)


@pytest.mark.parametrize("template", ["Bearer {key}", "bearer {key}", "BEARER    {key}"])
def test_the_key_is_accepted_in_any_scheme_case_and_spacing(
    fleet: FleetHandle, template: str
) -> None:
    """The shared parser's tolerance: `bearer` in any case, any spaces before the key."""
    r = _post(fleet, json.dumps(BODY).encode(), template.format(key=fleet.key))
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]


def _structured(schema: dict[str, Any]) -> bytes:
    rf = {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": schema}}
    return json.dumps({**BODY, "stream": True, "response_format": rf}).encode()


TOO_LARGE = {"type": "array", "minItems": 10_000, "items": {"type": "array", "minItems": 10_000}}


@pytest.mark.parametrize(
    ("content", "message", "logged_body", "logged_error"),
    [
        (b'{"model": [', "Invalid JSON body: ", '{"model": [', "malformed JSON"),
        (b"\xff\xfe\x00", "Invalid JSON body: ", "\ufffd\ufffd\x00", "malformed JSON"),
        (b"[1]", "request body must be a JSON object", [1], None),
        (b'{"model": "no/model", "messages": []}', "invalid request: messages", ..., None),
        (b'{"model": "no/model", "messages": [{"role": "user", "content": "hi"}]}',
         "no/model is not a valid model ID", ..., None),
        (_structured(TOO_LARGE), "invalid request: the schema asks for an instance larger",
         ..., "the schema asks for an instance larger"),
    ],
)  # fmt: skip
def test_each_refused_chat_body_is_400_and_logged_by_the_table(
    fleet: FleetHandle,
    content: bytes,
    message: str,
    logged_body: Any,
    logged_error: str | None,
) -> None:
    """Malformed JSON, a non-request, an unknown model and an unservable schema: 400
    `invalid_request` with the table's message, one log entry (its `error` and body as the
    table says), and the fleet keeps serving. `...`: the body logged as parsed."""
    r = _post(fleet, content, f"Bearer {fleet.key}")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == 400 and error["metadata"] == {"error_type": "invalid_request"}
    assert error["message"].startswith(message), error["message"]
    [entry] = fleet.requests()
    assert entry["status"] == 400 and entry["attempts"] == []
    assert entry["body"] == (json.loads(content) if logged_body is ... else logged_body)
    if logged_error is None:
        assert "error" not in entry
    else:
        assert entry["error"].startswith(logged_error) and list(entry)[-1] == "error"
    assert _post(fleet, json.dumps(BODY).encode(), f"Bearer {fleet.key}").status_code == 200


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{", "Invalid JSON body: "),
        (b"\xff", "Invalid JSON body: "),
        (b"[]", 'give exactly one of "name"'),
        (b'{"name": 3}', '"name" must be a string'),
        (b'{"name": "nope"}', "unknown scenario 'nope'"),
        (b'{"name": "seed-incidents", "time_scale": -1}', "scenario: time_scale"),
    ],
)
def test_each_refused_scenario_body_is_422_and_not_logged(
    fleet: FleetHandle, content: bytes, message: str
) -> None:
    """A control body that loads no scenario: 422 `unprocessable`, nothing logged, the
    running scenario kept."""
    r = fleet.http.post(f"{fleet.root_url}/_fleet/scenario", content=content)
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["metadata"] == {"error_type": "unprocessable"}
    assert error["message"].startswith(message), error["message"]
    assert fleet.requests() == [] and fleet.scenario()["name"] == "seed-incidents"


class _Narrower(RequestError):
    pass


def test_an_error_takes_the_rule_of_its_nearest_class_in_the_table() -> None:
    """A subclass of a listed error is answered by that error's rule; the tables are the
    only place the statuses live."""
    assert body_error(CHAT_BODY_ERRORS, _Narrower("x")) is CHAT_BODY_ERRORS[RequestError]
    assert body_error(CHAT_BODY_ERRORS, SchemaProblem("x")).logged_error == "{exc}"
    assert body_error(SCENARIO_BODY_ERRORS, ScenarioError("x")) == BodyError(422, "unprocessable")
    assert {rule.status for rule in CHAT_BODY_ERRORS.values()} == {400}
    assert {rule.status for rule in SCENARIO_BODY_ERRORS.values()} == {422}
    with pytest.raises(LookupError, match="KeyError"):
        body_error(CHAT_BODY_ERRORS, KeyError("not a body error"))
