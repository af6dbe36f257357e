"""The quarantine ledger on a real SQLite file (SPEC Q8, O3): decisions and per-endpoint rounds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sqlalchemy import create_engine, inspect

from ground.settings import PolicyConfig, load_settings
from probes.cost import EndpointBill, RoundBill
from probes.types import Contract, Outcome, OutcomeStatus
from quarantine.adapters.ledger import LEDGER_METADATA, DecisionRow, Ledger, ProbeRow
from quarantine.models import RoundReport
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
    """The default ledger is SQLite under CANARY_HOME; only our tables are created (the
    bill's two since issue 23)."""
    settings = load_settings(home=tmp_path / "home")
    ledger = Ledger(settings.resolved_ledger_url)
    assert (tmp_path / "home" / "ledger.db").exists()
    assert set(inspect(ledger.engine).get_table_names()) == {
        "quarantine_decisions",
        "quarantine_probes",
        "quarantine_rounds",
        "quarantine_costs",
    }
    ledger.close()


def _billed(round_id: str) -> RoundReport:
    bill = RoundBill(
        endpoints={
            "a": EndpointBill(tag="a", requests=9, prompt_tokens=900, completion_tokens=1200,
                              usd=0.01, estimated_usd=0.002, estimated_requests=1),
        }
    )  # fmt: skip
    base = report(round_id, T0, {"a": round_verdict("a", outcomes_for("a"))})
    return base.model_copy(update={"bill": bill, "refusal_probe": "unverified"})


def test_c13_a_rounds_bill_lands_in_its_own_tables(tmp_path: Path) -> None:
    """C13: one row per round (requests, tokens, cost, the refusal probe's standing) and one
    per endpoint; re-recording a round replaces them."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.record(_billed("r1"))
    ledger.record(_billed("r1"))
    rounds, costs = ledger.rounds_frame(MODEL), ledger.costs_frame(MODEL)
    assert len(rounds) == 1 and len(costs) == 1
    row = rounds.iloc[0]
    assert (row["requests"], row["cost_usd"], row["estimated_usd"]) == (9, 0.01, 0.002)
    assert row["refusal_probe"] == "unverified" and row["prompt_tokens"] == 900
    assert costs.iloc[0]["tag"] == "a" and costs.iloc[0]["estimated_requests"] == 1
    ledger.close()


def test_c13_a_ledger_of_an_earlier_version_keeps_working(tmp_path: Path) -> None:
    """C13: a ledger.db written before the bill existed (only the decisions and probes
    tables) opens, keeps its rows, gains the bill's tables, and records a billed round."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    old = create_engine(url)
    LEDGER_METADATA.create_all(old, tables=[DecisionRow.__table__, ProbeRow.__table__])  # type: ignore[attr-defined]
    with old.begin() as conn:
        conn.execute(
            ProbeRow.__table__.insert().values(  # type: ignore[attr-defined]
                round_id="r0", model=MODEL, tag="a", at=T0, verdict="clean", reasons=[],
                outcomes=[],
            )
        )  # fmt: skip
    old.dispose()
    ledger = Ledger(url)
    assert {"quarantine_rounds", "quarantine_costs"} <= set(
        inspect(ledger.engine).get_table_names()
    )
    ledger.record(_billed("r1"))
    assert list(ledger.probes_frame(MODEL)["round_id"]) == ["r0", "r1"]
    assert len(ledger.rounds_frame(MODEL)) == 1
    ledger.close()
