"""Gateway settings: client keys are secrets (house rule: secrets never reach reprs or logs)."""

from __future__ import annotations

import pytest

from ground.settings import Settings


def test_gateway_keys_parse_from_csv_and_never_show_in_reprs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CANARY_GATEWAY__KEYS still parses as comma-separated keys, and neither repr nor dump shows them."""
    monkeypatch.setenv("CANARY_GATEWAY__KEYS", "gw-key-one, gw-key-two")
    settings = Settings()
    assert [k.get_secret_value() for k in settings.gateway.keys] == ["gw-key-one", "gw-key-two"]
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        assert "gw-key-one" not in text and "gw-key-two" not in text
