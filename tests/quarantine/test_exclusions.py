"""The three exclusion layers and their merge into provider.ignore (SPEC Q7, O4)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prefect.variables import Variable

from quarantine.adapters.ignore import aignore_list, aignore_report
from quarantine.adapters.incidents import (
    aadd_runtime_exclusion,
    aread_runtime_exclusions,
    aremove_runtime_exclusion,
    variable_name,
)
from quarantine.adapters.store import aupdate_state
from quarantine.builtin import DEFAULT_PATH, BuiltinExclusion, load_builtin
from quarantine.errors import (
    BuiltinExclusionsError,
    ExclusionNotFoundError,
    ExclusionsCorruptError,
    ExclusionsFullError,
    ExpiryInPastError,
)
from quarantine.exclusions import (
    IgnoreEntry,
    Layer,
    RuntimeExclusion,
    covers,
    excluded_by_layers,
    ignore_tags,
    merge_ignore,
)
from quarantine.models import Mode
from tests.fixtures.quarantine_support import DAY, HALF_HOUR, MODEL, T0, F, run

HOUR = timedelta(hours=1)

GOOD = """
version: 1
exclusions:
  - tag: badhost/fp4
    model: "acme/*"
    reason: stray byte before the reply
    evidence: 19/20 replies corrupted; rounds r1-r4
    added: 2026-11-01
  - base_slug: filterco
    model: "*"
    reason: policy layer refuses supported scenes
    evidence: 12/12 refusals on the role-play probe
    added: 2026-10-15
  - tag: other/fp8
    model: "other/*"
    reason: only for other models
    evidence: n/a
    added: 2026-10-15
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "builtin.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_q7a_builtin_file_loads_and_matches_model_patterns(tmp_path: Path) -> None:
    """Q7a: entries validate; tag or base slug; model patterns decide which models they cover."""
    items = load_builtin(write(tmp_path, GOOD))
    assert [i.slug for i in items] == ["badhost/fp4", "filterco", "other/fp8"]
    assert [i.matches(MODEL) for i in items] == [True, True, False]
    assert str(items[0].added) == "2026-11-01"


def test_q7a_shipped_builtin_file_is_valid() -> None:
    """Q7a: the versioned file in the repo passes validation."""
    assert all(isinstance(i, BuiltinExclusion) for i in load_builtin(DEFAULT_PATH))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 2\nexclusions: []\n", "field 'version' must be 1"),
        ("version: 1\nexclusions: {}\n", "field 'exclusions' must be a list"),
        ("version: 1\nexclusions:\n  - {tag: a, model: '*', evidence: e, added: 2026-01-01}\n",
         r"entry 0 \(a\): field 'reason': Field required"),
        ("version: 1\nexclusions:\n  - {tag: a, base_slug: b, model: '*', reason: r, evidence: e, added: 2026-01-01}\n",
         "exactly one of 'tag' or 'base_slug'"),
        ("version: 1\nexclusions:\n  - {tag: a, model: '*', reason: r, evidence: e, added: someday}\n",
         "field 'added'"),
        ("version: 1\nexclusions:\n  - {tag: a, model: '*', reason: r, evidence: e, added: 2026-01-01, colour: red}\n",
         "field 'colour'"),
        ("version: 1\nexclusions:\n  - {tag: a, model: '*', reason: r, evidence: e, added: 2026-01-01}\n"
         "  - {tag: a, model: '*', reason: r2, evidence: e, added: 2026-01-02}\n",
         r"entry 1 \(a\): duplicate"),
        ("version: 1\nexclusions: [\n", "not valid YAML"),
    ],
    ids=["version", "not-a-list", "missing-reason", "tag-and-base", "bad-date", "unknown-field",
         "duplicate", "yaml"],
)  # fmt: skip
def test_q7a_bad_builtin_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    """Q7a: a bad file raises BuiltinExclusionsError naming the entry and the field."""
    with pytest.raises(BuiltinExclusionsError, match=message):
        load_builtin(write(tmp_path, text))


def test_q7a_missing_builtin_file_is_a_clear_error(tmp_path: Path) -> None:
    """Q7a: a missing file is named in the error."""
    with pytest.raises(BuiltinExclusionsError, match=r"nope\.yaml"):
        load_builtin(tmp_path / "nope.yaml")


def _runtime(tag: str, until_hours: int | None = None) -> RuntimeExclusion:
    until = T0 + timedelta(hours=until_hours) if until_hours is not None else None
    return RuntimeExclusion(tag=tag, reason="incident 42", author="ops", added_at=T0, until=until)


def test_q7_merge_sorts_dedups_and_prefers_builtin_then_incident(tmp_path: Path) -> None:
    """Q7: one entry per tag, sorted; a tag in several layers shows the first of builtin, incident, canary."""
    builtin = load_builtin(write(tmp_path, GOOD))
    state, _ = run([{"zz": F, "badhost/fp4": F, "inc": F}] * 2)
    runtime = [_runtime("badhost/fp4"), _runtime("inc"), _runtime("aa")]
    entries = merge_ignore(MODEL, builtin, runtime, state, T0 + HALF_HOUR)
    assert [(e.tag, e.layer) for e in entries] == [
        ("aa", Layer.INCIDENT),
        ("badhost/fp4", Layer.BUILTIN),
        ("filterco", Layer.BUILTIN),
        ("inc", Layer.INCIDENT),
        ("zz", Layer.CANARY),
    ]
    assert ignore_tags(entries) == ["aa", "badhost/fp4", "filterco", "inc", "zz"]
    canary = entries[-1]
    assert canary.until == T0 + HALF_HOUR + DAY and "rung 1" in canary.reason


def test_q7b_expired_runtime_entries_drop_out_by_themselves() -> None:
    """Q7b: an incident exclusion stops applying at its expiry without anyone removing it."""
    runtime = [_runtime("a", until_hours=2), _runtime("b")]
    assert ignore_tags(merge_ignore(MODEL, [], runtime, None, T0 + timedelta(hours=1))) == [
        "a",
        "b",
    ]
    assert ignore_tags(merge_ignore(MODEL, [], runtime, None, T0 + timedelta(hours=2))) == ["b"]


def test_q7c_canary_layer_only_in_enforce_mode_and_only_until_the_end() -> None:
    """Q7c/Q3: suspensions enter only in enforce mode and leave at their end; shadow ones never."""
    enforce, _ = run([{"a": F}, {"a": F}])
    observe, _ = run([{"a": F}, {"a": F}], mode=Mode.OBSERVE)
    at = T0 + HALF_HOUR
    assert ignore_tags(merge_ignore(MODEL, [], [], enforce, at)) == ["a"]
    assert ignore_tags(merge_ignore(MODEL, [], [], enforce, at + DAY)) == []
    assert merge_ignore(MODEL, [], [], observe, at) == []


def test_q4_round_report_exclusions_cover_base_slugs_and_skip_the_canary_layer(
    tmp_path: Path,
) -> None:
    """Q4/Q7: excluded_by_layers finds endpoints covered by a base slug or tag, not by suspensions."""
    builtin = load_builtin(write(tmp_path, GOOD))
    state, _ = run([{"sick/fp8": F}] * 2)
    entries = merge_ignore(MODEL, builtin, [_runtime("inc/fp8")], state, T0 + HALF_HOUR)
    tags = ["filterco/fp8", "filterco/bf16", "badhost/fp4", "badhost/fp8", "inc/fp8", "sick/fp8"]
    assert excluded_by_layers(entries, tags) == {
        "filterco/fp8",
        "filterco/bf16",
        "badhost/fp4",
        "inc/fp8",
    }
    assert covers(entries, "sick/fp8") and not covers(entries, "badhost/fp8")


def new_model() -> str:
    return f"test/{uuid.uuid4().hex[:10]}"


@pytest.mark.usefixtures("prefect_api")
class TestRuntimeExclusions:
    """Runtime incident exclusions in real Prefect Variables (Q7b, O4)."""

    async def test_q7b_add_is_visible_at_once_and_remove_takes_it_out(self) -> None:
        """Q7b/O4: add -> the next ignore-list read has it; remove -> gone; the Variable records who."""
        model = new_model()
        await aadd_runtime_exclusion(
            model, "bad/fp8", reason="garbled starts", author="alice", now=T0
        )
        entries = await aignore_list(model, T0 + HALF_HOUR)
        assert [(e.tag, e.layer) for e in entries] == [("bad/fp8", Layer.INCIDENT)]
        assert "garbled starts (alice)" in entries[0].reason
        raw = await Variable.aget(variable_name(model))
        assert isinstance(raw, dict)  # the Variable's JSON document
        assert raw["last_change"]["action"] == "added" and raw["last_change"]["actor"] == "alice"
        removed = await aremove_runtime_exclusion(model, "bad/fp8", actor="bob", now=T0 + DAY)
        assert removed.tag == "bad/fp8"
        assert await aignore_list(model, T0 + DAY) == []
        raw = await Variable.aget(variable_name(model))
        assert isinstance(raw, dict)  # the Variable's JSON document
        assert raw["last_change"] == {
            "action": "removed", "tag": "bad/fp8", "actor": "bob", "at": (T0 + DAY).isoformat()
        }  # fmt: skip

    async def test_q7b_expiry_in_the_past_is_refused_without_change(self) -> None:
        """Q7b: an expiry at or before now is a clear error and writes nothing."""
        model = new_model()
        with pytest.raises(ExpiryInPastError, match="not after now"):
            await aadd_runtime_exclusion(model, "x", reason="r", author="a", until=T0, now=T0)
        assert await Variable.aget(variable_name(model)) is None

    async def test_q7b_expiring_entry_leaves_and_is_pruned_on_next_write(self) -> None:
        """Q7b: an entry with an expiry drops out of the list by itself, and the next write prunes it."""
        model = new_model()
        await aadd_runtime_exclusion(
            model, "x", reason="r", author="a", until=T0 + timedelta(hours=1), now=T0
        )
        assert ignore_tags(await aignore_list(model, T0 + timedelta(minutes=59))) == ["x"]
        assert await aignore_list(model, T0 + timedelta(hours=1)) == []
        await aadd_runtime_exclusion(model, "y", reason="r", author="a", now=T0 + DAY)
        assert [e.tag for e in await aread_runtime_exclusions(model)] == ["y"]

    async def test_q7b_removing_an_absent_exclusion_is_a_clear_error(self) -> None:
        """Q7b: removing a tag that has no active runtime exclusion names the active ones."""
        model = new_model()
        await aadd_runtime_exclusion(model, "x", reason="r", author="a", now=T0)
        with pytest.raises(ExclusionNotFoundError, match=r"'nope'.*active: \['x'\]"):
            await aremove_runtime_exclusion(model, "nope", actor="a", now=T0)

    async def test_q7b_full_variable_refuses_the_add_and_keeps_the_old_value(self) -> None:
        """Q7b: past Prefect's 5,000-character Variable limit the add fails loudly; nothing changes."""
        model = new_model()
        entries: list[dict[str, Any]] = []
        while len(json.dumps({"version": 1, "entries": entries}, separators=(",", ":"))) < 4850:
            entry = _runtime(f"host{len(entries)}/fp8").model_copy(update={"reason": "r" * 100})
            entries.append(entry.model_dump(mode="json"))
        await Variable.aset(
            variable_name(model), {"version": 1, "entries": entries}, overwrite=True
        )
        before = await Variable.aget(variable_name(model))
        with pytest.raises(ExclusionsFullError, match=r"5000.*Nothing changed"):
            await aadd_runtime_exclusion(model, "one/more", reason="r" * 100, author="a", now=T0)
        assert await Variable.aget(variable_name(model)) == before
        assert len(await aread_runtime_exclusions(model)) == len(entries)

    async def test_q7b_corrupt_variable_keeps_the_other_layers_and_is_not_overwritten(
        self, tmp_path: Path
    ) -> None:
        """Q7b: a Variable edited into something else adds no entries (a warning naming it)
        while the built-in and canary layers still apply; an add refuses to overwrite it."""
        model = "acme/" + uuid.uuid4().hex[:8]
        await aupdate_state(model, lambda s: run([{"sick/fp8": F}] * 2, state=s))
        await Variable.aset(variable_name(model), {"entries": "oops"}, overwrite=True)
        report = await aignore_report(model, T0 + HOUR, builtin_path=write(tmp_path, GOOD))
        assert ignore_tags(report.entries) == ["badhost/fp4", "filterco", "sick/fp8"]
        [warning] = report.warnings
        assert variable_name(model) in warning and "not a runtime-exclusions document" in warning
        with pytest.raises(ExclusionsCorruptError, match=variable_name(model)):
            await aadd_runtime_exclusion(model, "x", reason="r", author="a", now=T0)
        assert await Variable.aget(variable_name(model)) == {"entries": "oops"}

    async def test_q7b_invalid_entry_is_skipped_by_name_and_the_rest_apply(self) -> None:
        """Q7b: a hand-edited entry that does not validate is skipped with a warning naming
        it; the valid entries and the canary layer still apply; writes keep it for a human."""
        model = "acme/" + uuid.uuid4().hex[:8]
        await aupdate_state(model, lambda s: run([{"sick/fp8": F}] * 2, state=s))
        good = _runtime("good/fp8").model_dump(mode="json")
        bad = {**_runtime("typo/fp8").model_dump(mode="json"), "until": "next tuesday"}
        await Variable.aset(
            variable_name(model), {"version": 1, "entries": [bad, good, 42]}, overwrite=True
        )
        report = await aignore_report(model, T0 + HOUR)
        assert {"good/fp8", "sick/fp8"} <= set(ignore_tags(report.entries))
        assert "typo/fp8" not in ignore_tags(report.entries)
        assert len(report.warnings) == 2
        assert "entry 0 ('typo/fp8') skipped, until:" in report.warnings[0]
        assert "entry 2 skipped" in report.warnings[1]
        assert ignore_tags(await aignore_list(model, T0 + HOUR)) == ignore_tags(report.entries)
        await aadd_runtime_exclusion(model, "new/fp8", reason="r", author="a", now=T0 + HOUR)
        raw = await Variable.aget(variable_name(model))
        assert isinstance(raw, dict)  # the Variable's JSON document
        assert bad in raw["entries"] and 42 in raw["entries"]
        tags = {e.tag for e in await aread_runtime_exclusions(model)}
        assert tags == {"good/fp8", "new/fp8"}

    async def test_q7_aignore_list_merges_all_three_layers(self, tmp_path: Path) -> None:
        """Q7: built-in file + Variable + stored state (enforce) merge into one ignore list."""
        model = "acme/" + uuid.uuid4().hex[:8]
        await aupdate_state(model, lambda s: run([{"sick/fp8": F}] * 2, state=s))
        await aadd_runtime_exclusion(model, "incident/fp16", reason="outage", author="ops", now=T0)
        entries = await aignore_list(model, T0 + HOUR, builtin_path=write(tmp_path, GOOD))
        assert [(e.tag, e.layer.value) for e in entries] == [
            ("badhost/fp4", "builtin"),
            ("filterco", "builtin"),
            ("incident/fp16", "incident"),
            ("sick/fp8", "canary"),
        ]
        assert all(isinstance(e, IgnoreEntry) for e in entries)

    async def test_q7b_variable_value_is_plain_json(self) -> None:
        """O4: the Variable holds plain JSON an admin can read and edit in the UI."""
        model = new_model()
        await aadd_runtime_exclusion(model, "x", reason="r", author="a", now=T0)
        raw = await Variable.aget(variable_name(model))
        assert isinstance(raw, dict)  # the Variable's JSON document
        assert json.loads(json.dumps(raw))["entries"][0]["tag"] == "x"
