"""The quarantine ledger on a real SQLite file (SPEC Q8, O3): decisions and per-endpoint rounds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sqlalchemy import inspect

from ground.settings import PolicyConfig, load_settings
from probes.types import Contract, Outcome, OutcomeStatus
from quarantine.adapters.ledger import Ledger
from quarantine.policy import step
from quarantine.verdicts import round_verdict
from tests.fixtures.quarantine_support import DAY, HALF_HOUR, MODEL, T0, F, report, run


def outcomes_for(tag: str) -> list[Outcome]:
    return [
        Outcome(
            contract=Contract.LATENCY, status=OutcomeStatus.PASS, reason="ok", tag=tag, ttft_s=0.8
        ),
        Outcome(
            contract=Contract.LANGUAGE,
            status=OutcomeStatus.FAIL,
            reason="language_mixing",
            tag=tag,
            locale="pt-BR",
            evidence={"share_es": 0.4},
        ),
    ]


def test_q8_every_decision_becomes_a_row_queryable_with_pandas(tmp_path: Path) -> None:
    """Q8: decisions (with evidence and round ids) land one per row; pandas reads them back."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'deep' / 'ledger.db'}")
    _, decisions = run([{"a": F, "b": F}] * 2 + [{"a": F}] * 2, production=["a", "b", "c"])
    assert ledger.record_decisions(decisions) == len(decisions) == 2
    frame = ledger.decisions_frame(MODEL)
    assert list(frame["kind"]) == ["suspended", "blocked_by_floor"]
    assert list(frame["tag"]) == ["a", "b"]
    assert frame.loc[0, "evidence"] == ["start:stray_prefix"]
    assert frame.loc[0, "round_ids"] == ["r0", "r1"]
    assert frame.loc[0, "until"] == pd.Timestamp(T0 + HALF_HOUR + DAY)
    assert str(frame["at"].dt.tz) == "UTC"
    assert ledger.decisions_frame("someone/else").empty


def test_q8_probe_rows_carry_verdict_reasons_locale_ttft_and_outcomes(tmp_path: Path) -> None:
    """Q8/O3: one row per endpoint per round with verdict, reasons, locale, TTFT and outcomes."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    outs = {"a": outcomes_for("a")}
    rep = report("r7", T0, {"a": round_verdict("a", outs["a"])}, language_failed={"a": "pt-BR"})
    assert ledger.record(rep, outs) == (1, 0)
    assert ledger.record(rep, outs) == (1, 0)  # replaying a round replaces its rows
    frame = ledger.probes_frame(MODEL)
    assert len(frame) == 1
    row = frame.iloc[0]
    assert (row["round_id"], row["tag"], row["verdict"], row["locale"], row["ttft_s"]) == (
        "r7", "a", "failed", "pt-BR", 0.8
    )  # fmt: skip
    assert row["reasons"] == ["language:language_mixing"]
    assert row["outcomes"][1]["evidence"] == {"share_es": 0.4}


def test_q8_frames_filter_by_since(tmp_path: Path) -> None:
    """O3: `since` keeps only newer rows."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    state, decisions = run([{"a": F}] * 2)
    ledger.record_decisions(decisions)
    _, later = step(state, report("r9", T0 + 2 * DAY, {"a": F}), PolicyConfig())
    ledger.record_decisions(later)
    frame = ledger.decisions_frame(MODEL, since=T0 + DAY)
    assert list(frame["kind"]) == ["expired"]


def test_ledger_default_url_lives_under_canary_home_and_keeps_its_own_tables(
    tmp_path: Path,
) -> None:
    """The default ledger is SQLite under CANARY_HOME; only our two tables are created."""
    settings = load_settings(home=tmp_path / "home")
    ledger = Ledger(settings.resolved_ledger_url)
    assert (tmp_path / "home" / "ledger.db").exists()
    assert set(inspect(ledger.engine).get_table_names()) == {
        "quarantine_decisions",
        "quarantine_probes",
    }
    ledger.close()
