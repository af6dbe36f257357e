"""Input mistakes are found before any flow run starts: one line on the terminal, exit 2
for what the operator can fix in the command or configuration, exit 1 for our runtime
(an unreachable URL, an unknown model), no traceback unless `--debug`, and no Failed run
left in the audit history. Real fleet, real Prefect API (test harness)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from prefect import get_client
from typer.testing import CliRunner

from canary.cli import app
from quarantine.errors import UnknownModelError
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

T0 = "2026-11-07T00:00:00Z"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


async def _count_runs() -> int:
    async with get_client() as client:
        return await client.count_flow_runs()


def _one_line(out: str) -> str:
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    assert "Traceback" not in out
    return lines[0]


@pytest.fixture
def judged_model(canary_env: FleetHandle) -> str:
    """A model the canary has judged once (enforce), with a failing host."""
    model = "test/preflight"
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("bad/fp8", defects=STRAY)],
    )
    code, out = _run("round", "--model", model, "--mode", "enforce", "--at", T0)
    assert code == 0, out
    return model


def test_every_input_mistake_is_one_line_with_its_exit_code_and_no_flow_run(
    judged_model: str, canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mistyped tags (exclude add/remove, lift, --endpoint, triage), a past --until, model
    ids without a slash, an unknown model for ignore/status: each one line, the right
    exit code, and not a single new flow run."""
    m = judged_model
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    mistakes: list[tuple[tuple[str, ...], int, str]] = [
        (("exclude", "add", "deepinfra/fp88", "--model", m, "--reason", "r"), 2, "--force"),
        (("exclude", "add", "a/fp8", "--model", m, "--reason", "r", "--until", past), 2, "--until"),
        (("exclude", "remove", "nothere/fp8", "--model", m), 2, "no active runtime exclusion"),
        (("lift", "bda/fp8", "--model", m, "--reason", "fixed"), 2, "no endpoint 'bda/fp8'"),
        (("lift", "a/fp8", "--model", m, "--reason", "fixed"), 1, "not suspended"),
        (("round", "--model", m, "--endpoint", "zz/fp8"), 2, "unknown endpoint(s) zz/fp8"),
        (("triage", "--model", m, "--provider", "zz/fp8"), 2, "unknown endpoint(s) zz/fp8"),
        (("round", "--model", "noslash"), 2, "author/slug"),
        (("status", "--model", "noslash"), 2, "author/slug"),
        (("ignore", "--model", "noslash"), 2, "author/slug"),
        (("exclude", "add", "a/fp8", "--model", "noslash", "--reason", "r"), 2, "author/slug"),
        (("lift", "a/fp8", "--model", "noslash", "--reason", "r"), 2, "author/slug"),
        (("ignore", "--model", "test/typo-model"), 1, "unknown model 'test/typo-model'"),
        (("status", "--model", "test/typo-model"), 1, "test/typo-model"),
        (("clock", "reset", "--model", "test/typo-model", "--reason", "r"), 1, "typo-model"),
        (("lock", "release", "--model", m, "--reason", " "), 2, "--reason"),
    ]
    before = asyncio.run(_count_runs())
    for args, code, needle in mistakes:
        got, out = _run(*args)
        assert got == code, (args, out)
        assert needle in _one_line(out), (args, out)
    assert asyncio.run(_count_runs()) == before


def test_missing_key_and_unreachable_base_url_are_one_line_naming_them(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key: exit 2 naming CANARY_API_KEY. A base URL nothing answers on: exit 1 naming
    it. Both before any flow run (and before Prefect is even needed)."""
    before = asyncio.run(_count_runs())
    monkeypatch.setenv("CANARY_API_KEY", "")
    code, out = _run("round", "--model", "test/preflight-key")
    assert code == 2 and "CANARY_API_KEY" in _one_line(out), out
    code, out = _run("triage", "--model", "test/preflight-key", "--provider", "a/fp8")
    assert code == 2 and "CANARY_API_KEY" in _one_line(out), out

    monkeypatch.setenv("CANARY_API_KEY", canary_env.key)
    dead = "http://127.0.0.1:9/api/v1"  # the discard port: nothing listens
    monkeypatch.setenv("CANARY_BASE_URL", dead)
    code, out = _run("round", "--model", "test/preflight-key")
    assert code == 1 and f"CANARY_BASE_URL={dead}" in _one_line(out), out
    monkeypatch.setenv("CANARY_BASE_URL", "ftp://example")
    code, out = _run("round", "--model", "test/preflight-key")
    assert code == 2 and "CANARY_BASE_URL" in _one_line(out), out
    assert asyncio.run(_count_runs()) == before


def test_debug_shows_the_traceback(canary_env: FleetHandle) -> None:
    """`canary --debug` lets the exception through (a traceback); without it, one line."""
    result = CliRunner().invoke(app, ["--debug", "status", "--model", "test/debug-unknown"])
    assert isinstance(result.exception, UnknownModelError)
    code, out = _run("status", "--model", "test/debug-unknown")
    assert code == 1 and "test/debug-unknown" in _one_line(out)
