"""The layer contract (pyproject `[tool.importlinter]`, run by `make test`) is not a test
that cannot fail: an import that runs up a layer breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["ground", "wire", "probes", "quarantine", "routing", "reports", "flows", "canary", "deployments", "fleet"]  # fmt: skip
LINT = Path(sys.executable).parent / "lint-imports"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the tree for the module's cases (each case edits one file and restores it)."""
    root = tmp_path_factory.mktemp("layers") / "tree"
    root.mkdir()
    for name in PACKAGES:
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is a dev dependency")
def test_the_copied_tree_keeps_every_contract(tree: Path) -> None:
    """The copy itself lints clean, so each break below is the one import it adds."""
    out = _lint(tree)
    assert out.returncode == 0, out.stdout[-3000:]


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is a dev dependency")
@pytest.mark.parametrize(
    ("module", "upward", "contract"),
    [
        ("ground/clock.py", "import flows.roundplan", "ground < wire"),
        ("wire/text.py", "import probes.types", "ground < wire"),
        ("quarantine/policy.py", "import prefect", "pure cores"),
        ("fleet/wire.py", "import routing.errors", "the fleet is a world of its own"),
        ("routing/classify.py", "import aiohttp", "pure cores"),
        ("routing/moves.py", "import routing.upstream", "pure cores"),  # aiohttp, indirectly
        ("routing/breaker.py", "import httpx", "pure cores"),  # only the probe client may
        ("routing/records.py", "import sqlmodel", "pure cores"),
    ],
)
def test_an_upward_import_breaks_the_layer_contract(
    tree: Path, module: str, upward: str, contract: str
) -> None:
    """A copy of the tree with one import that runs up a layer fails lint-imports."""
    target = tree / module
    original = target.read_text()
    target.write_text(original + f"\n{upward}  # an upward import\n")
    try:
        out = _lint(tree)
    finally:
        target.write_text(original)
    assert out.returncode != 0, out.stdout[-2000:]
    broken = out.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, out.stdout[-3000:]


def test_the_gateway_reads_provider_ignore_without_prefects_flow_engine() -> None:
    """The gateway and the ignore-list adapter import Prefect's client API only, never its
    flow/task machinery (a fresh interpreter, so nothing else imported it first)."""
    code = (
        "import sys\n"
        "import routing.gateway, routing.exclusions, quarantine.adapters.ignore\n"
        "heavy = ('prefect.flows', 'prefect.tasks', 'prefect.flow_engine', 'prefect.task_engine')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
