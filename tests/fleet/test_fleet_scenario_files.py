"""Scenario files that cannot be read or decoded are a `ScenarioError` naming the
file (issue 2 §2-3: a bad scenario file gets a clear error): `canary fleet
serve` exits 2 without a traceback, POST /_fleet/scenario answers 422 and the
running scenario keeps serving."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from typer.testing import CliRunner

from fleet.cli import app
from fleet.scenario import SCENARIO_DIR, Defect, Fault, ScenarioError, load_scenario
from tests.fixtures.fleet import FleetHandle

LLAMA = "meta-llama/llama-3.3-70b-instruct"
PROMPT = [{"role": "user", "content": "Continue the scene: the lantern flickers in the cellar."}]
LATIN1 = "name: caf\xe9\nmodels: []\n".encode("latin-1")


def _still_serving(fleet: FleetHandle) -> None:
    r = fleet.chat({"model": LLAMA, "messages": PROMPT})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
    assert fleet.scenario()["name"] == "seed-incidents"


@pytest.fixture
def unreadable(tmp_path: Path) -> Path:
    """A .yaml path whose read fails with an OSError even for root (a link to /proc/self/mem)."""
    if not Path("/proc/self/mem").exists():
        pytest.skip("needs Linux /proc")
    path = tmp_path / "unreadable.yaml"
    path.symlink_to("/proc/self/mem")
    return path


def test_non_utf8_scenario_file_is_scenario_error(tmp_path: Path) -> None:
    """A latin-1 scenario file raises ScenarioError naming the file and the offending byte."""
    path = tmp_path / "latin.yaml"
    path.write_bytes(LATIN1)
    with pytest.raises(ScenarioError, match=r"latin\.yaml: not UTF-8 text .*offset 9"):
        load_scenario(path)


def test_unreadable_scenario_file_is_scenario_error(unreadable: Path) -> None:
    """A file that cannot be read (OSError) raises ScenarioError naming the file."""
    with pytest.raises(ScenarioError, match=r"unreadable\.yaml: cannot read scenario file"):
        load_scenario(unreadable)


@pytest.mark.parametrize("bad", [5, None, ["seed-incidents"], "a\x00b.yaml"])
def test_bad_scenario_names_are_scenario_error(bad: object) -> None:
    """A name that is not a string, or not a possible path (NUL byte), raises ScenarioError."""
    with pytest.raises(ScenarioError):
        load_scenario(bad)  # type: ignore[arg-type]


def test_cli_serve_with_non_utf8_file_exits_2(tmp_path: Path) -> None:
    """`canary fleet serve --scenario latin.yaml` exits 2 with a one-line error, no traceback."""
    path = tmp_path / "latin.yaml"
    path.write_bytes(LATIN1)
    result = CliRunner().invoke(app, ["serve", "--scenario", str(path), "--port", "0"])
    assert result.exit_code == 2, result.output
    assert "latin.yaml: not UTF-8 text" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_scenario_control_422_for_unreadable_or_mistyped(
    fleet: FleetHandle, tmp_path: Path, unreadable: Path
) -> None:
    """POST /_fleet/scenario with a non-UTF-8 file, an unreadable file or a non-string name is 422; the old scenario keeps serving."""
    path = tmp_path / "latin.yaml"
    path.write_bytes(LATIN1)
    url = f"{fleet.root_url}/_fleet/scenario"
    for body, words in [
        ({"name": str(path)}, "latin.yaml: not UTF-8 text"),
        ({"name": str(unreadable)}, "unreadable.yaml: cannot read scenario file"),
        ({"name": 5}, '"name" must be a string'),
        ({"name": ["seed-incidents"]}, '"name" must be a string'),
    ]:
        r = fleet.http.post(url, json=body)
        assert r.status_code == 422, (body, r.text)
        err = r.json()["error"]
        assert err["metadata"]["error_type"] == "unprocessable" and words in err["message"]
    _still_serving(fleet)


BAD_TOML = """\
name = "broken"

[[models]]
id = "test/model"

[[models.endpoints]]
tag = "good/fp8"
provider_name = "Good"

[[models.endpoints]]
tag = "bad/fp8"
provider_name = "Bad"

[models.endpoints.timing]
ttft_s = 0.3
tokens_per_s = 0

[[models.endpoints.faults]]
kind = "http_error"
status = 418
rate = 0.5
"""


def test_toml_scenario_errors_name_the_line(tmp_path: Path) -> None:
    """A bad TOML scenario names each offending field with its line, as YAML does."""
    path = tmp_path / "broken.toml"
    path.write_text(BAD_TOML)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert "broken.toml: models.0.endpoints.1.timing.tokens_per_s (line 16):" in message
    assert "broken.toml: models.0.endpoints.1.faults.0.status (line 20):" in message
    inline = BAD_TOML.split("[models.endpoints.timing]")[0] + (
        'faults = [{ kind = "http_error", status = 418, rate = 0.5 }]\n'
    )
    path.write_text(inline)
    with pytest.raises(
        ScenarioError, match=r"models\.0\.endpoints\.1\.faults\.0\.status \(line 14\)"
    ):
        load_scenario(path)


def _kinds(name: str) -> set[str]:
    scenario = load_scenario(name)
    return {
        item.kind for m in scenario.models for e in m.endpoints for item in [*e.faults, *e.defects]
    }


def test_seed_incidents_header_names_where_every_other_defect_class_lives() -> None:
    """Every fault/defect class missing from seed-incidents is served by defect-zoo or
    contracts-zoo and named in seed-incidents.yaml's header comment after `defect-zoo` (issue 2
    §2, issue 22 §6: every defect class)."""
    header = []
    for line in (SCENARIO_DIR / "seed-incidents.yaml").read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    zoo_part = "\n".join(header).partition("defect-zoo")[2]
    assert zoo_part, "the header comment must point at defect-zoo"
    every = {
        kind
        for union in (Fault, Defect)
        for member in get_args(get_args(union)[0])
        for kind in get_args(member.model_fields["kind"].annotation)
    }
    missing = every - _kinds("seed-incidents")
    assert missing and missing <= _kinds("defect-zoo") | _kinds("contracts-zoo")
    assert {k for k in missing if k not in zoo_part} == set()
