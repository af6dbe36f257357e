"""The command line from an analyst's seat (O3, Q7, Q8): `canary status` says why and since
when, shows exclusions as such and fits 80 columns without cutting dates; `canary exclude
list`; `--version`; help pages without `<bool>`. In-process CliRunner against the real
fleet and Prefect's test harness (`canary status` of a suspended host and an incident:
tests/flows/test_round_artifacts.py, on the round world)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from canary.cli import app

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), terminal_width=80)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["round"],
        ["status"],
        ["exclude", "add"],
        ["exclude", "list"],
        ["demo"],
        ["history"],
        ["report"],
        ["triage"],
        ["gateway", "serve"],
        ["gateway", "report"],
        ["served"],
        ["ledger", "prune"],
        ["fleet", "serve"],
    ],
)
def test_help_pages_show_flags_without_a_type_and_no_spec_codes(command: list[str]) -> None:
    """`--help` shows `--force`, not `--force <bool>`, and explains in words."""
    code, out = _run(*command, "--help")
    assert code == 0, out
    assert "<bool>" not in out
    assert not re.search(r"\b[CQRO]\d{1,2}\b", out), out


def test_version_prints_the_installed_version() -> None:
    """`canary --version` prints the package's version and exits 0."""
    from importlib.metadata import version

    code, out = _run("--version")
    assert code == 0 and out.strip() == f"provider-canary {version('provider-canary')}"
