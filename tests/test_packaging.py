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
from quarantine.builtin import load_builtin
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
    assert help_commands(cli.stdout) == {
        "round", "triage", "status", "ignore", "lift", "history", "report", "exclude", "server",
        "serve", "demo", "gateway", "fleet", "clock", "lock", "ledger", "served",
    }  # fmt: skip


def help_commands(text: str) -> set[str]:
    """The command names listed in the `Commands` box of a Typer/rich `--help` page."""
    names: set[str] = set()
    inside = False
    for line in text.splitlines():
        if "Commands" in line and line.lstrip().startswith("╭"):
            inside = True
            continue
        if inside and line.lstrip().startswith("╰"):
            break
        if inside:
            cell = line.strip().strip("│").rstrip()
            if cell.startswith(" ") and not cell.startswith("  "):  # a name, not a wrapped line
                names.add(cell.split()[0])
    return names


def test_help_commands_parser_reads_only_the_commands_box() -> None:
    """The parser above is not a substring check: names outside the box do not count."""
    text = (
        "Usage: canary round status\n"
        "╭─ Commands ──╮\n│ round    Run one.   │\n│          more text │\n│ lift     Lift. │\n"
        "╰─────────────╯\n"
    )
    assert help_commands(text) == {"round", "lift"}
