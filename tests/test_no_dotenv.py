"""Tests never read a developer's `.env`: the suite runs in an empty working directory of
its own (tests/conftest.py), so a `.env` in the checkout reaches neither the settings the
tests build nor those of the subprocesses the fixtures start (which inherit it)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ground.settings import Settings, load_settings

CHECKOUT = Path(__file__).resolve().parents[1]
PLANTED = {"CANARY_FLEET_KEY": "read-from-the-checkout-dotenv", "CANARY_PROBE__CONCURRENCY": "3"}
_CHILD = (
    "from ground.settings import load_settings\n"
    "print(load_settings().fleet_key.get_secret_value())\n"
)


@pytest.fixture
def checkout_dotenv() -> Iterator[Path | None]:
    """A `.env` in the checkout root setting `PLANTED`, removed afterwards; None when the
    developer has one there already (it is left alone, and must not be read either)."""
    path = CHECKOUT / ".env"
    try:
        with path.open("x", encoding="utf-8") as out:
            out.writelines(f"{name}={value}\n" for name, value in PLANTED.items())
    except FileExistsError:
        yield None
        return
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def test_the_suite_runs_where_there_is_no_dotenv() -> None:
    """The working directory is an empty one of the session's, not the checkout."""
    cwd = Path.cwd().resolve()
    assert cwd != CHECKOUT and CHECKOUT not in cwd.parents
    assert not (cwd / ".env").exists()


def test_a_dotenv_in_the_checkout_root_is_not_read(
    checkout_dotenv: Path | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `.env` in the checkout would change the settings if read (shown by reading it on
    purpose); `load_settings()` here and in a subprocess started as the fixtures start
    theirs still give the settings without any env file."""
    for name in PLANTED:  # a variable would win over the file and hide it
        monkeypatch.delenv(name, raising=False)
    without = Settings(_env_file=None)
    if checkout_dotenv is not None:
        planted = Settings(_env_file=checkout_dotenv)
        assert planted.fleet_key.get_secret_value() == PLANTED["CANARY_FLEET_KEY"]
        assert planted.probe.concurrency == 3
    assert load_settings() == without
    child = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert child.stdout.strip() == without.fleet_key.get_secret_value()
    assert child.stdout.strip() != PLANTED["CANARY_FLEET_KEY"]
