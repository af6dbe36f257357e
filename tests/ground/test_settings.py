"""ground/settings.py: `load_settings()` hands out one instance while what it reads is
unchanged, and a new one as soon as the environment, the working directory or `.env`
changes; the instance cannot be changed by whoever holds it."""

from __future__ import annotations

import os
from pathlib import Path

import pydantic
import pytest

from ground.settings import load_settings


def test_one_instance_while_nothing_changes_and_a_new_one_when_something_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CANARY_PROBE_CONCURRENCY", "7")
    first = load_settings()
    assert load_settings() is first and first.probe_concurrency == 7

    monkeypatch.setenv("CANARY_PROBE_CONCURRENCY", "9")  # the environment
    assert load_settings().probe_concurrency == 9

    monkeypatch.delenv("CANARY_PROBE_CONCURRENCY")
    (tmp_path / ".env").write_text("CANARY_PROBE_CONCURRENCY=11\n")  # a .env appears
    assert load_settings().probe_concurrency == 11
    (tmp_path / ".env").write_text("CANARY_PROBE_CONCURRENCY=12\n")  # same size: the
    os.utime(tmp_path / ".env", ns=(1, 1))  # modification time tells the change
    assert load_settings().probe_concurrency == 12

    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)  # another working directory: no .env there
    assert load_settings().probe_concurrency != 12


def test_overrides_build_their_own_instance_and_the_shared_one_is_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shared = load_settings()
    assert load_settings(probe_concurrency=3).probe_concurrency == 3
    assert load_settings() is shared and shared.probe_concurrency != 3
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        shared.probe_concurrency = 5  # type: ignore[misc]


def test_a_bad_value_is_refused_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANARY_PROBE_CONCURRENCY", "lots")
    for _ in range(2):
        with pytest.raises(pydantic.ValidationError, match="probe_concurrency"):
            load_settings()
