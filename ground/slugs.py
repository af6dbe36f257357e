"""Model ids as name parts, in one spelling.

`readable_slug` is the lowercase-digits-dashes form of an id (for round ids and titles);
`model_slug` adds an 8-hex hash suffix so ids that differ only in punctuation stay apart
(for Prefect block, variable, artifact and lock names, which must be unique).
"""

from __future__ import annotations

import hashlib
import re

_NON_NAME = re.compile(r"[^a-z0-9]+")


def readable_slug(model: str) -> str:
    """`meta-llama/llama-3.3-70b-instruct` -> `meta-llama-llama-3-3-70b-instruct`."""
    return _NON_NAME.sub("-", model.lower()).strip("-")


def model_slug(model: str) -> str:
    """A stable Prefect-safe name part for a model id (lowercase, digits, dashes).

    `meta-llama/llama-3.3-70b-instruct` -> `meta-llama-llama-3-3-70b-instruct-1b4c9d2e`;
    the 8-hex suffix (sha256 of the id) keeps ids that differ only in punctuation apart.
    """
    if not model.strip():
        raise ValueError("model id must not be empty")
    base = readable_slug(model)[:80] or "model"
    return f"{base}-{hashlib.sha256(model.encode()).hexdigest()[:8]}"
