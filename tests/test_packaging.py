"""The installed `canary` command works outside the checkout (the README's commands
run it from anywhere): bundled data files load through the editable install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CODE = """
from probes.prompts import prompt_for
from probes.refusal import refusal_patterns
from probes.language import check_language
from fleet.scenario import load_scenario
from quarantine.exclusions import load_builtin
print(len(prompt_for("language", "th")), len(refusal_patterns("ar")) > 0,
      check_language("Olá! Como vai você hoje? Eu estou muito bem, obrigado.", "pt-BR").status,
      len(load_scenario("seed-incidents").models), isinstance(load_builtin(), list))
"""


def test_installed_entry_point_outside_checkout(tmp_path: Path) -> None:
    """Data files load when the process starts outside the repository (no CWD on sys.path)."""
    out = subprocess.run(
        [sys.executable, "-c", CODE], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2", "True", "pass", "3", "True"]
    cli = subprocess.run(
        [str(Path(sys.executable).parent / "canary"), "--help"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr[-2000:]
    for command in (
        "round",
        "status",
        "ignore",
        "exclude",
        "lift",
        "triage",
        "serve",
        "fleet",
        "gateway",
        "demo",
    ):
        assert command in cli.stdout
