"""Pure parts of the fleet: schema instance generation and breaking, text
defects, chunking, scenario validation (issue 2 §2; SPEC R7, R12)."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet import bank, defects, schema_gen
from fleet.language import LOCALES
from fleet.scenario import ScenarioError, parse_scenario

_names = st.text("abcdefghij_", min_size=1, max_size=8)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    strings = st.builds(
        lambda lo, extra: {"type": "string", "minLength": lo, "maxLength": lo + extra},
        st.integers(0, 5),
        st.integers(0, 20),
    )
    ints = st.builds(
        lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
        st.integers(-50, 50),
        st.integers(0, 100),
    )
    nums = st.builds(
        lambda lo, span: {"type": "number", "minimum": lo, "maximum": lo + span},
        st.floats(-10, 10),
        st.floats(0, 10),
    )
    enums = st.lists(
        st.one_of(st.text(max_size=5), st.integers()), min_size=1, max_size=4, unique=True
    ).map(lambda v: {"enum": v})
    return st.one_of(
        strings, ints, nums, enums, st.just({"type": "boolean"}), st.just({"type": "null"})
    )


schemas = st.recursive(
    _leaf(),
    lambda inner: st.one_of(
        st.builds(
            lambda props, strict: {
                "type": "object",
                "properties": props,
                "required": sorted(props),
                **({"additionalProperties": False} if strict else {}),
            },
            st.dictionaries(_names, inner, max_size=4),
            st.booleans(),
        ),
        st.builds(
            lambda items, lo: {"type": "array", "items": items, "minItems": lo, "maxItems": lo + 2},
            inner,
            st.integers(0, 2),
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(schemas, st.integers(0, 2**32))
def test_r7_generated_instance_validates_any_schema(schema: dict[str, Any], seed: int) -> None:
    """For any schema of the supported subset, the generated instance validates."""
    jsonschema.validate(schema_gen.generate(schema, random.Random(seed)), schema)


OBJECT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "ok"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("mode", ["invalid_json", "missing_field", "wrong_type", "prose"])
@pytest.mark.parametrize("seed", range(10))
def test_c6_broken_instance_never_validates(mode: str, seed: int) -> None:
    """Every schema-break mode yields text that fails json.loads or the schema."""
    rng = random.Random(seed)
    text = schema_gen.break_instance(schema_gen.generate(OBJECT, rng), OBJECT, mode, rng)
    with pytest.raises((json.JSONDecodeError, jsonschema.ValidationError)):
        jsonschema.validate(json.loads(text), OBJECT)


@pytest.mark.parametrize("seed", range(30))
def test_c9_stray_start_never_starts_with_the_marker(seed: int) -> None:
    """A stray start puts punctuation or a fragment before the `*` opener."""
    rng = random.Random(seed)
    text = bank.compose_reply("en", rng)
    bad = defects.stray_start(text, rng)
    assert bad.endswith(text) and not bad.startswith("*") and len(bad) > len(text)


@pytest.mark.parametrize("codec", ["cp1252", "latin-1", "cp1251", "gbk", "shift_jis"])
@pytest.mark.parametrize("locale", LOCALES)
def test_c7_mojibake_changes_every_locale(codec: str, locale: str) -> None:
    """Mis-decoding UTF-8 visibly changes a reply in every locale (openers carry non-ASCII)."""
    text = bank.compose_reply(locale, random.Random(3))
    assert defects.mojibake(text, codec) != text


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(LOCALES), st.integers(0, 2**32))
def test_chunks_concatenate_to_the_reply(locale: str, seed: int) -> None:
    """Stream chunks are small and concatenate back to the exact reply."""
    text = bank.compose_reply(locale, random.Random(seed))
    chunks = bank.chunk_text(text, locale)
    assert "".join(chunks) == text and max(len(c) for c in chunks) < 40


@pytest.mark.parametrize("locale", LOCALES)
def test_banks_are_complete(locale: str) -> None:
    """Each of the 17 banks has >= 12 distinct sentences, >= 6 `*action*` openers and refusals."""
    b = bank.bank(locale)
    assert len(set(b.sentences)) >= 12 and len(b.refusals) >= 3
    assert len(b.openers) >= 6 and all(o.startswith("*") and o.endswith("*") for o in b.openers)


def test_scenario_rates_must_not_exceed_one() -> None:
    """Mutually exclusive fault rates summing above 1 are rejected with the field named."""
    data = {
        "models": [
            {
                "id": "a/b",
                "endpoints": [
                    {
                        "tag": "x/y",
                        "provider_name": "X",
                        "faults": [
                            {"kind": "reset", "rate": 0.7},
                            {"kind": "stream_cut", "rate": 0.5},
                        ],
                    }
                ],
            }
        ]
    }
    with pytest.raises(
        ScenarioError, match=r"models\.0\.endpoints\.0: .*faults rates sum to 1\.200"
    ):
        parse_scenario(data)
