"""ground/settings.py: `load_settings()` hands out one instance while what it reads is
unchanged, and a new one as soon as the environment, the working directory or `.env`
changes; the instance cannot be changed by whoever holds it."""

from __future__ import annotations

import os
from pathlib import Path

import pydantic
import pytest

from ground.settings import RenamedSettingError, load_settings


def test_one_instance_while_nothing_changes_and_a_new_one_when_something_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CANARY_PROBE__CONCURRENCY", "7")
    first = load_settings()
    assert load_settings() is first and first.probe.concurrency == 7

    monkeypatch.setenv("CANARY_PROBE__CONCURRENCY", "9")  # the environment
    assert load_settings().probe.concurrency == 9

    monkeypatch.delenv("CANARY_PROBE__CONCURRENCY")
    (tmp_path / ".env").write_text("CANARY_PROBE__CONCURRENCY=11\n")  # a .env appears
    assert load_settings().probe.concurrency == 11
    (tmp_path / ".env").write_text("CANARY_PROBE__CONCURRENCY=12\n")  # same size: the
    os.utime(tmp_path / ".env", ns=(1, 1))  # modification time tells the change
    assert load_settings().probe.concurrency == 12

    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)  # another working directory: no .env there
    assert load_settings().probe.concurrency != 12


def test_overrides_build_their_own_instance_and_the_shared_one_is_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shared = load_settings()
    assert load_settings(probe={"concurrency": 3}).probe.concurrency == 3
    assert load_settings() is shared and shared.probe.concurrency != 3
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        shared.probe = shared.probe  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        shared.probe.concurrency = 5  # type: ignore[misc]


def test_a_bad_value_is_refused_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANARY_PROBE__CONCURRENCY", "lots")
    for _ in range(2):
        with pytest.raises(pydantic.ValidationError, match=r"probe\.concurrency"):
            load_settings()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("CANARY_START_SAMPLES", "CANARY_PROBE__START_SAMPLES"),
        ("CANARY_PROBE_CONCURRENCY", "CANARY_PROBE__CONCURRENCY"),
        ("CANARY_ROUTING_BACKOFF_BASE_S", "CANARY_ROUTING__BACKOFF_BASE_S"),
        ("CANARY_GATEWAY_KEYS", "CANARY_GATEWAY__KEYS"),
    ],
)
def test_a_flat_name_of_an_earlier_version_is_refused_with_its_nested_name(
    old: str, new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A knob that moved into a domain's config is never silently ignored under its old name."""
    monkeypatch.setenv(old, "1")
    with pytest.raises(RenamedSettingError, match=f"{old} is no longer read: use {new}"):
        load_settings()


def test_nested_lists_take_commas_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """`CANARY_GATEWAY__KEYS` inside the gateway's config reads like the top-level lists."""
    monkeypatch.setenv("CANARY_GATEWAY__KEYS", "k-one, k-two")
    assert [k.get_secret_value() for k in load_settings().gateway.keys] == ["k-one", "k-two"]
    monkeypatch.setenv("CANARY_GATEWAY__KEYS", '["k-three"]')
    assert [k.get_secret_value() for k in load_settings().gateway.keys] == ["k-three"]
