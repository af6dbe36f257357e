"""Prompt packs per locale, read from `probes/data/prompts/<locale>.json`.

Each pack holds, in its own language:
- `system`: the narrator persona (stay in character, write in <language>, open
  every reply with an action in `*asterisks*`, then a few sentences);
- `language`: a user turn inviting a several-sentence reply (C7, also C3 / C9);
- `start`: a second role-play user turn, for extra response-start samples (C9);
- `refusal`: a fixed benign role-play continuation (user / assistant / user
  turns; a sword fight with a bandit: fiction the product supports) (C4);
- `structured`: asks for the small character object of probes/structured.py (C6).

    prompt_for(Contract.LANGUAGE, "pt-BR") -> [{"role": "system", ...}, {"role": "user", ...}]
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from ground.errors import CanaryError
from probes.types import Contract

LOCALES: tuple[str, ...] = (
    "en", "es", "pt-BR", "fr", "de", "it", "pl", "ru", "uk",
    "tr", "ja", "ko", "zh-Hans", "id", "vi", "ar", "th",
)  # fmt: skip

_TEXT_KEYS = ("system", "language", "start", "structured")

# Bundled data, read by path: importlib.resources trips over setuptools'
# editable installs on Python 3.12.1 (test_installed_entry_point_outside_checkout).
DATA_DIR = Path(__file__).resolve().parent / "data"


class UnknownLocaleError(CanaryError, KeyError):
    """No prompt pack exists for the locale."""


@cache
def prompt_pack(locale: str) -> dict[str, Any]:
    """The validated prompt pack of `locale` (cached; treat as read-only)."""
    try:
        raw = (DATA_DIR / "prompts" / f"{locale}.json").read_text("utf-8")
    except FileNotFoundError as exc:
        raise UnknownLocaleError(
            f"no prompt pack for locale {locale!r}; known: {', '.join(LOCALES)}"
        ) from exc
    pack = json.loads(raw)
    if pack.get("locale") != locale:
        raise ValueError(f"prompt pack {locale}.json declares locale {pack.get('locale')!r}")
    for key in _TEXT_KEYS:
        if not isinstance(pack.get(key), str) or not pack[key].strip():
            raise ValueError(f"prompt pack {locale}.json lacks a non-empty {key!r}")
    turns = pack.get("refusal")
    if (
        not isinstance(turns, list)
        or not turns
        or any(not isinstance(t, dict) or t.get("role") not in ("user", "assistant") for t in turns)
        or turns[-1].get("role") != "user"
    ):
        raise ValueError(
            f"prompt pack {locale}.json: 'refusal' must be turns ending with a user turn"
        )
    return pack


def prompt_for(
    contract: Contract, locale: str, *, variant: str | None = None
) -> list[dict[str, Any]]:
    """The chat messages of `contract`'s probe in `locale` (a fresh list each call).

    LATENCY and LANGUAGE share the `language` turn; START uses the `start` turn
    (pass `variant="language"` to get the other one).
    """
    pack = prompt_pack(locale)
    system = {"role": "system", "content": pack["system"]}
    if contract is Contract.REFUSAL:
        return [system, *({"role": t["role"], "content": t["content"]} for t in pack["refusal"])]
    if contract is Contract.STRUCTURED:
        return [system, {"role": "user", "content": pack["structured"]}]
    key = variant or ("start" if contract is Contract.START else "language")
    if key not in ("language", "start"):
        raise ValueError(f"unknown prompt variant {key!r}")
    return [system, {"role": "user", "content": pack[key]}]
