"""The quarantine ledger: one row per decision and one per endpoint per round, in SQL, so
analysts query history with pandas instead of scraping Prefect.

Tables (own SQLModel metadata `LEDGER_METADATA`, created on open, so other folders' tables on
the same URL are neither created nor touched by us): `quarantine_decisions`,
`quarantine_probes`, and the canary's bill (C13): `quarantine_rounds` (one row per round:
requests, tokens, cost, how it ran for the budget, the refusal probe's standing) and
`quarantine_costs` (one row per endpoint per round: requests, tokens, cost). The bill's
tables are new tables rather than new columns, so a ledger written by an earlier version
keeps working: opening it creates them and touches nothing else. URL:
`settings.resolved_ledger_url` (SQLite under CANARY_HOME by default; any SQLAlchemy URL,
e.g. postgresql+psycopg://...).

    from quarantine.adapters.ledger import Ledger
    Ledger(url).decisions_frame("meta-llama/llama-3.3-70b-instruct", since=...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, Column, DateTime, UniqueConstraint, delete, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import registry
from sqlmodel import Field, Session, SQLModel

from ground.clock import as_utc
from ground.db import open_engine
from probes.types import Contract, Outcome
from quarantine.models import Decision, RoundReport

if TYPE_CHECKING:  # pandas is imported where a frame is read: a round only writes rows
    import pandas as pd


class _LedgerBase(SQLModel, registry=registry()):
    pass


LEDGER_METADATA = _LedgerBase.metadata


class DecisionRow(_LedgerBase, table=True):
    __tablename__ = "quarantine_decisions"

    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(index=True)
    kind: str = Field(index=True)
    tag: str = Field(index=True)
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), index=True, nullable=False))
    mode: str
    reason: str
    until: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    rung: int | None = None
    evidence: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    round_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    actor: str | None = None


class ProbeRow(_LedgerBase, table=True):
    __tablename__ = "quarantine_probes"
    __table_args__ = (UniqueConstraint("round_id", "model", "tag"),)

    id: int | None = Field(default=None, primary_key=True)
    round_id: str = Field(index=True)
    model: str = Field(index=True)
    tag: str = Field(index=True)
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), index=True, nullable=False))
    verdict: str
    reasons: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    locale: str | None = None
    ttft_s: float | None = None
    outcomes: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )


class RoundRow(_LedgerBase, table=True):
    """One round of a model: what it cost and how it ran for the budget (C13)."""

    __tablename__ = "quarantine_rounds"
    __table_args__ = (UniqueConstraint("round_id", "model"),)

    id: int | None = Field(default=None, primary_key=True)
    round_id: str = Field(index=True)
    model: str = Field(index=True)
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), index=True, nullable=False))
    endpoints: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    estimated_usd: float = 0.0
    budget_level: str | None = None
    start_samples: int | None = None
    budget_usd: float | None = None
    forecast_usd: float | None = None
    refusal_probe: str | None = None


class CostRow(_LedgerBase, table=True):
    """One endpoint's probes in one round: requests, tokens and cost (C13)."""

    __tablename__ = "quarantine_costs"
    __table_args__ = (UniqueConstraint("round_id", "model", "tag"),)

    id: int | None = Field(default=None, primary_key=True)
    round_id: str = Field(index=True)
    model: str = Field(index=True)
    tag: str = Field(index=True)
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), index=True, nullable=False))
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    estimated_usd: float = 0.0
    estimated_requests: int = 0


def _bill_rows(report: RoundReport) -> list[RoundRow | CostRow]:
    """The round's bill rows (none for a report without a bill, e.g. a triage's)."""
    if report.bill is None and report.budget is None:
        return []
    bill, budget = report.bill, report.budget
    total = bill.total if bill is not None else None
    rid, model, at = report.round_id, report.model, report.at
    rows: list[RoundRow | CostRow] = [
        RoundRow(
            round_id=rid,
            model=model,
            at=at,
            endpoints=len(report.rounds),
            requests=total.requests if total else 0,
            prompt_tokens=total.prompt_tokens if total else 0,
            completion_tokens=total.completion_tokens if total else 0,
            cost_usd=total.usd if total else 0.0,
            estimated_usd=total.estimated_usd if total else 0.0,
            budget_level=budget.level.value if budget else None,
            start_samples=budget.start_samples if budget else None,
            budget_usd=budget.budget_usd if budget else None,
            forecast_usd=budget.forecast_usd if budget else None,
            refusal_probe=report.refusal_probe,
        )
    ]
    for tag, b in sorted((bill.endpoints if bill is not None else {}).items()):
        rows.append(
            CostRow(
                round_id=rid,
                model=model,
                at=at,
                tag=tag,
                requests=b.requests,
                prompt_tokens=b.prompt_tokens,
                completion_tokens=b.completion_tokens,
                cost_usd=b.usd,
                estimated_usd=b.estimated_usd,
                estimated_requests=b.estimated_requests,
            )
        )
    return rows


def _locale(tag: str, report: RoundReport, outcomes: Sequence[Outcome]) -> str | None:
    if tag in report.language_failed_locales:
        return report.language_failed_locales[tag]
    return next((o.locale for o in outcomes if o.locale), None)


def _ttft(outcomes: Sequence[Outcome]) -> float | None:
    latency = [
        o.ttft_s for o in outcomes if o.contract is Contract.LATENCY and o.ttft_s is not None
    ]
    other = [o.ttft_s for o in outcomes if o.ttft_s is not None]
    return min(latency) if latency else (min(other) if other else None)


def _decision_rows(decisions: Sequence[Decision]) -> list[DecisionRow]:
    return [
        DecisionRow(
            model=d.model,
            kind=d.kind.value,
            tag=d.tag,
            at=d.at,
            mode=d.mode.value,
            reason=d.reason,
            until=d.until,
            rung=d.rung,
            evidence=list(d.evidence),
            round_ids=list(d.round_ids),
            actor=d.actor,
        )
        for d in decisions
    ]


def _probe_rows(report: RoundReport, outcomes: Mapping[str, Sequence[Outcome]]) -> list[ProbeRow]:
    rows = []
    for tag, rnd in sorted(report.rounds.items()):
        mine = list(outcomes.get(tag, ()))
        rows.append(
            ProbeRow(
                round_id=report.round_id,
                model=report.model,
                tag=tag,
                at=report.at,
                verdict=rnd.verdict.value,
                reasons=list(rnd.reasons),
                locale=_locale(tag, report, mine),
                ttft_s=_ttft(mine),
                outcomes=[o.model_dump(mode="json") for o in mine],
            )
        )
    return rows


class Ledger:
    """The ledger on one SQLAlchemy URL; tables are created on open."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = open_engine(url)
        LEDGER_METADATA.create_all(self.engine)

    def record_decisions(self, decisions: Sequence[Decision]) -> int:
        """Append one row per decision; returns how many."""
        rows = _decision_rows(decisions)
        with Session(self.engine) as session:
            session.add_all(rows)
            session.commit()
        return len(rows)

    def record(
        self,
        report: RoundReport,
        outcomes: Mapping[str, Sequence[Outcome]] | None = None,
        decisions: Sequence[Decision] = (),
    ) -> tuple[int, int]:
        """A round's rows in one transaction: one per endpoint (re-recording a round replaces
        its rows), one per decision, and its bill (one row for the round, one per endpoint);
        returns how many probe and decision rows."""
        probes = _probe_rows(report, outcomes or {})
        rows = _decision_rows(decisions)
        with Session(self.engine) as session:
            for table in (ProbeRow, RoundRow, CostRow):
                session.execute(
                    delete(table).where(
                        table.round_id == report.round_id,  # type: ignore[arg-type]
                        table.model == report.model,  # type: ignore[arg-type]
                    )
                )
            session.add_all([*probes, *rows, *_bill_rows(report)])
            session.commit()
        return len(probes), len(rows)

    def _frame(self, table: type[_LedgerBase], model: str, since: datetime | None) -> pd.DataFrame:
        query = select(table).where(table.model == model)  # type: ignore[attr-defined]
        if since is not None:
            query = query.where(table.at >= as_utc(since))  # type: ignore[attr-defined]
        query = query.order_by(table.at, table.id)  # type: ignore[attr-defined]
        import pandas as pd

        frame = pd.read_sql(query, self.engine)
        for column in ("at", "until"):
            if column in frame:
                frame[column] = pd.to_datetime(frame[column], utc=True)
        return frame

    def decisions_frame(self, model: str, since: datetime | None = None) -> pd.DataFrame:
        """Decisions of `model` (oldest first) as a DataFrame, `at` and `until` in UTC."""
        return self._frame(DecisionRow, model, since)

    def probes_frame(self, model: str, since: datetime | None = None) -> pd.DataFrame:
        """Per-endpoint round rows of `model` (oldest first) as a DataFrame."""
        return self._frame(ProbeRow, model, since)

    def rounds_frame(self, model: str, since: datetime | None = None) -> pd.DataFrame:
        """One row per round of `model` (oldest first): what it cost, its budget level."""
        return self._frame(RoundRow, model, since)

    def costs_frame(self, model: str, since: datetime | None = None) -> pd.DataFrame:
        """One row per endpoint per round of `model` (oldest first): requests, tokens, cost."""
        return self._frame(CostRow, model, since)

    def close(self) -> None:
        self.engine.dispose()
