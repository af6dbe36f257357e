"""Bad input to the fleet gets a clear, specific error and the server keeps
serving (issue 2 §3); scenario files are validated with field and line;
responses are deterministic for a seed; the control endpoints work."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fleet.scenario import ScenarioError, load_scenario
from tests.fixtures.fleet import FleetHandle

LLAMA = "meta-llama/llama-3.3-70b-instruct"
PROMPT = [{"role": "user", "content": "Continue the scene: the lantern flickers in the cellar."}]
PIN = {"only": ["deepinfra/fp8"], "allow_fallbacks": False}


def _still_serving(fleet: FleetHandle) -> None:
    r = fleet.chat({"model": LLAMA, "messages": PROMPT, "provider": PIN})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]


def test_malformed_json_body_is_400(fleet: FleetHandle) -> None:
    """A body that is not JSON: 400 `invalid_request` naming the JSON problem; next request served."""
    r = fleet.http.post(
        f"{fleet.base_url}/chat/completions",
        content=b'{"model": "x", "messages": [',
        headers={"Authorization": f"Bearer {fleet.key}", "Content-Type": "application/json"},
    )
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["metadata"]["error_type"] == "invalid_request" and err["message"].startswith(
        "Invalid JSON body"
    )
    _still_serving(fleet)


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"messages": "hello"}, "messages"),
        ({"messages": []}, "messages"),
        ({"stream": "yes please"}, "stream"),
        ({"max_tokens": -3}, "max_tokens"),
        ({"temperature": "hot"}, "temperature"),
        ({"provider": {"only": "deepinfra/fp8"}}, "provider.only"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
    ],
)
def test_wrong_types_are_400_naming_the_field(
    fleet: FleetHandle, patch: dict[str, object], field: str
) -> None:
    """Wrong types or values: 400 whose message names the offending field; the server keeps serving."""
    r = fleet.chat({"model": LLAMA, "messages": PROMPT, **patch})
    assert r.status_code == 400
    assert f"invalid request: {field}" in r.json()["error"]["message"]
    _still_serving(fleet)


def test_unknown_model_chat_400_and_endpoints_404(fleet: FleetHandle) -> None:
    """An unknown model: chat is 400 `... is not a valid model ID`; its endpoints listing is the 404 envelope."""
    r = fleet.chat({"model": "nobody/nothing", "messages": PROMPT})
    assert (
        r.status_code == 400
        and r.json()["error"]["message"] == "nobody/nothing is not a valid model ID"
    )
    r = fleet.http.get(f"{fleet.base_url}/models/nobody/nothing/endpoints")
    assert r.status_code == 404 and r.json() == {
        "error": {
            "code": 404,
            "message": "Resource not found",
            "metadata": {"error_type": "not_found"},
        }
    }
    _still_serving(fleet)


def test_request_log_records_body_as_received_and_clears(fleet: FleetHandle) -> None:
    """GET /_fleet/requests lists served endpoint, status, stream flag and the body as received; DELETE clears."""
    body = {
        "model": LLAMA,
        "messages": PROMPT,
        "provider": PIN,
        "temperature": 0.7,
        "x_custom": [1, 2],
    }
    fleet.chat(body)
    fleet.chat({"model": LLAMA, "messages": PROMPT}, key="bad")
    log = fleet.requests()
    assert [(e["tag"], e["provider_name"], e["status"], e["stream"]) for e in log] == [
        ("deepinfra/fp8", "DeepInfra", 200, False),
        (None, None, 401, False),
    ]
    assert log[0]["body"] == body and log[0]["ts"] <= log[1]["ts"]
    fleet.clear_requests()
    assert fleet.requests() == []


def test_same_seed_same_responses(fleet: FleetHandle) -> None:
    """Same scenario + seed + request sequence gives the same responses; another seed gives different ones."""

    def run(seed: int) -> list[object]:
        fleet.load("seed-incidents", time_scale=0.01, seed=seed)
        out: list[object] = []
        for tag in (
            "startcorrupt/fp8",
            "deepinfra/fp8",
            "startcorrupt/fp8",
            "policywall/fp8",
            "flaky/fp8",
        ):
            body = {
                "model": LLAMA,
                "messages": PROMPT,
                "provider": {"only": [tag], "allow_fallbacks": False},
            }
            try:
                r = fleet.chat(body)
            except httpx.TransportError as exc:
                out.append(type(exc).__name__)
                continue
            data = r.json()
            out.append(
                (
                    r.status_code,
                    data["choices"][0]["message"]["content"] if r.status_code == 200 else data,
                )
            )
        return out

    first, again, other = run(1), run(1), run(2)
    assert first == again
    assert first != other


def test_scenario_control_get_post_and_422(fleet: FleetHandle) -> None:
    """POST /_fleet/scenario swaps scenarios (time_scale scales scripted TTFT); a bad one is 422 and the old one keeps serving."""
    described = fleet.load("seed-incidents", time_scale=0.5)
    assert described["time_scale"] == 0.5
    ep = next(e for e in described["models"][0]["endpoints"] if e["tag"] == "deepinfra/fp8")
    assert ep["scripted_ttft_s"] == pytest.approx(0.15)
    with pytest.raises(ValueError, match=r"models\.0\.endpoints\.0\.timing\.tokens_per_s"):
        fleet.load(
            {
                "models": [
                    {
                        "id": "a/b",
                        "endpoints": [
                            {"tag": "x/y", "provider_name": "X", "timing": {"tokens_per_s": 0}}
                        ],
                    }
                ]
            }
        )
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        fleet.load("nope")
    r = fleet.http.post(f"{fleet.root_url}/_fleet/scenario", content=b"{")
    assert r.status_code == 422
    assert fleet.scenario()["name"] == "seed-incidents"
    _still_serving(fleet)


def test_scenario_makes_broken_host_healthy_again(fleet: FleetHandle) -> None:
    """Replacing the scenario (e.g. StartCorrupt without its defect) changes behaviour at once."""
    scenario = load_scenario("seed-incidents").model_dump(mode="json")
    for ep in scenario["models"][0]["endpoints"]:
        ep["defects"], ep["faults"] = [], []
    fleet.load(scenario, time_scale=0.01)
    for _ in range(5):
        r = fleet.chat(
            {
                "model": LLAMA,
                "messages": PROMPT,
                "provider": {"only": ["startcorrupt/fp8"], "allow_fallbacks": False},
            }
        )
        assert r.json()["choices"][0]["message"]["content"].startswith("*")


BAD_YAML = """\
name: broken
models:
  - id: test/model
    endpoints:
      - tag: good/fp8
        provider_name: Good
      - tag: bad/fp8
        provider_name: Bad
        faults:
          - kind: http_error
            status: 418
            rate: 0.5
"""


def test_bad_scenario_file_names_field_and_line(tmp_path: Path) -> None:
    """A bad scenario file raises ScenarioError naming the field path and its YAML line."""
    path = tmp_path / "broken.yaml"
    path.write_text(BAD_YAML)
    with pytest.raises(
        ScenarioError, match=r"broken\.yaml: models\.0\.endpoints\.1\.faults\.0\.status \(line 11\)"
    ):
        load_scenario(path)
    path.write_text(
        BAD_YAML.replace("status: 418", "status: 429").replace(
            "rate: 0.5", "rate: 0.5\n            first_n: 2"
        )
    )
    with pytest.raises(
        ScenarioError, match=r"faults\.0 \(line 10\).*exactly one of `rate` or `first_n`"
    ):
        load_scenario(path)
    path.write_text("models: [unclosed")
    with pytest.raises(ScenarioError, match="not valid yaml"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="scenario file not found"):
        load_scenario(tmp_path / "missing.yaml")


def test_cli_rejects_bad_scenario_with_exit_2(tmp_path: Path) -> None:
    """`canary fleet serve --scenario BAD` exits 2 with the field/line message instead of serving."""
    from typer.testing import CliRunner

    from fleet.cli import app

    path = tmp_path / "broken.yaml"
    path.write_text(BAD_YAML)
    result = CliRunner().invoke(app, ["serve", "--scenario", str(path), "--port", "0"])
    assert result.exit_code == 2
    assert "faults.0.status (line 11)" in result.output


def test_builtin_scenarios_load() -> None:
    """The built-in scenarios validate; seed-incidents has the 24 llama endpoints and three models."""
    seed = load_scenario("seed-incidents")
    assert [len(m.endpoints) for m in seed.models] == [24, 4, 3]
    assert load_scenario("defect-zoo").models and load_scenario("contracts-zoo").models
