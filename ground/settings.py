"""The one settings object: every knob of provider-canary, read from `CANARY_*`.

Precedence (pydantic-settings): explicit keyword arguments > environment
variables > `.env` file in the working directory > the defaults below, which
equal the numbers in SPEC.md. Lists accept either JSON (`["a","b"]`) or a
comma-separated string (`a,b`). Secrets are `SecretStr`: they print as
`**********` and never reach logs, artifacts or events.

Each section below belongs to one folder of the project; add a knob to the
section of the folder that reads it. Each domain has its own config object, which is also
the object its code takes whole, so each default is written once, here (a test fails when a
module restates one: `tests/ground/test_defaults.py`):

    probe       `ProbeConfig` (probes/, the round's probing)  CANARY_PROBE__START_SAMPLES=6 ...
    policy      `PolicyConfig` (quarantine/policy.py)         CANARY_POLICY__FAIL_ROUNDS=2 ...
    routing     `RoutingConfig` (routing/: retries, upstream) CANARY_ROUTING__BACKOFF_BASE_S=0.1 ...
    breaker     `BreakerConfig` (routing/breaker.py)          CANARY_BREAKER__ERROR_RATE=0.5 ...
    allowances  `Allowances` (routing/deadline.py)            CANARY_ALLOWANCES__CONNECT_S=0.2 ...
    gateway     `GatewayConfig` (routing/gateway.py, serving) CANARY_GATEWAY__MAX_BODY_BYTES=2000000 ...
    budget      `BudgetConfig` (quarantine/budget.py, C13)   CANARY_DAILY_BUDGET_USD=5 ...
    ledger      `LedgerConfig` (retention, flows/retention.py) CANARY_LEDGER__RETENTION_DAYS=30 ...
    passive     `PassiveConfig` (routing/passive*, O8)         CANARY_PASSIVE__WINDOW_S=600 ...

Nested values are set with a double underscore (or as JSON: CANARY_POLICY='{"floor": 3}').
Names of earlier versions (CANARY_CAPACITY_FLOOR, CANARY_START_SAMPLES, CANARY_ROUTING_...,
CANARY_GATEWAY_KEYS, ...) are refused with the new name, never silently ignored.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from cronsim import CronSim, CronSimError
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from ground.errors import CanaryError

DEFAULT_LOCALES: tuple[str, ...] = (
    "en", "es", "pt-BR", "fr", "de", "it", "pl", "ru", "uk",
    "tr", "ja", "ko", "zh-Hans", "id", "vi", "ar", "th",
)  # fmt: skip

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
DEFAULT_MODEL = "meta-llama/llama-3.3-70b-instruct"

CsvList = Annotated[list[str], NoDecode]
SecretCsvList = Annotated[list[SecretStr], NoDecode]  # comma-separated secrets, masked in reprs


def _split_csv(value: object) -> object:
    """Accept `a,b`, a JSON list string, or a list; return a list of stripped items."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list: {exc.msg}") from exc
            return [str(item).strip() for item in parsed if str(item).strip()]
        return [item.strip() for item in text.split(",") if item.strip()]
    return value


class ProbeConfig(BaseModel):
    """How the canary probes an endpoint and compares it with its peers (SPEC C2-C12); the
    object `probes.client.ProbeClient`, `probes.probeset.run_probe_set` and the round's peer
    step take whole."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_threshold_s: float = Field(
        default=10.0, gt=0, description="C3: no text within this fails the latency probe."
    )
    connect_timeout_s: float = Field(default=5.0, gt=0, description="Connect (and write) bound.")
    total_timeout_s: float = Field(default=60.0, gt=0, description="Bound on one probe request.")
    max_bytes: int = Field(default=1_000_000, gt=0, description="Bound on one probe's reply.")
    max_error_body_bytes: int = Field(
        default=64_000, ge=1024, description="An error body is read up to this."
    )
    max_discovery_bytes: int = Field(
        default=5_000_000, ge=1024, description="Bound on the endpoints listing."
    )
    max_tokens: int = Field(default=300, gt=0, description="`max_tokens` of every probe.")
    start_samples: int = Field(
        default=6, ge=0, description="Extra start replies per endpoint and round (issue 14 power)."
    )
    start_anomaly_min_replies: int = Field(
        default=3, ge=1, description="C9: judged replies needed before the start share counts."
    )
    start_anomaly_share: float = Field(
        default=0.15, gt=0, le=1, description="C9: share of anomalous starts that fails a host."
    )
    confirmations: int = Field(
        default=2, ge=1, description="C8: language attempts after a failure (majority of 1+N)."
    )
    peer_alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="Family-wise error of the peer comparison per contract.",
    )
    peer_min_effect: float = Field(
        default=0.15, ge=0, le=1, description="How far above its peers' rate a host must be."
    )
    start_peer_outlier_enforce: bool = Field(
        default=False, description="Count `start:peer_outlier` as a failure (else evidence only)."
    )
    concurrency: int = Field(default=8, ge=1, description="Probe sets of a round at once.")
    tool_samples: int = Field(
        default=12,
        ge=0,
        description="C10: required tool calls per endpoint and round (issue 22 power).",
    )
    tool_check_samples: int = Field(
        default=4,
        ge=0,
        description="C10: `tool_choice: none` requests and tool-result round trips, each.",
    )
    tool_trigger_samples: int = Field(
        default=3, ge=0, description="C10: requests of each `auto` prompt (trigger rates)."
    )
    tool_max_tokens: int = Field(default=200, gt=0, description="`max_tokens` of a tool probe.")
    tool_concurrency: int = Field(
        default=8, ge=1, description="Tool requests of one probe set in flight at once."
    )
    tool_failure_share: float = Field(
        default=0.25, gt=0, le=1, description="C10: share of failing tool calls that fails a host."
    )
    trigger_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="C10: share of `auto` replies against the prompt that puts a host above the "
        "bar (then judged against its peers only).",
    )
    stream_buffered_min_s: float = Field(
        default=2.0,
        gt=0,
        description="C12: a reply sent at once after at least this much silence is buffered.",
    )
    slow_output_ratio: float = Field(
        default=0.25,
        gt=0,
        lt=1,
        description="C12: output speed below this share of the peers' median is slow.",
    )
    slow_output_enforce: bool = Field(
        default=False, description="Count `stream:slow_output` as a failure (else evidence only)."
    )
    disable_reasoning: bool = Field(
        default=False,
        description="Send `reasoning: {enabled: false}` to endpoints advertising `reasoning`.",
    )

    @property
    def max_connections(self) -> int:
        """The probe client's pool: room for every concurrent probe set's requests."""
        return max(8, self.concurrency * 4)


class PolicyConfig(BaseModel):
    """The quarantine policy's knobs; defaults equal SPEC Q2, Q4, Q5, Q6."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    floor: int = Field(default=2, ge=0, description="Q4: never suspend below this many hosts.")
    fail_rounds: int = Field(default=2, ge=1, description="Q2: failing rounds to suspend.")
    clean_rounds: int = Field(default=2, ge=1, description="Q5: clean rounds to reinstate.")
    ladder_days: Annotated[tuple[float, ...], NoDecode] = Field(
        default=(1.0, 3.0, 7.0), description="Q6: suspension days: first, second, every further."
    )
    forget_after_days: float = Field(
        default=14.0, gt=0, description="Q6: days without a suspension that forget the ladder."
    )

    @field_validator("ladder_days", mode="before")
    @classmethod
    def _ladder(cls, value: object) -> object:
        value = _split_csv(value)
        try:
            days = tuple(float(v) for v in value)  # type: ignore[attr-defined]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ladder_days must be numbers of days, got {value!r}") from exc
        if not days or any(d <= 0 for d in days):
            raise ValueError("ladder_days must be a non-empty list of positive numbers")
        return days

    def duration(self, rung: int) -> timedelta:
        """Length of the suspension at ladder rung `rung` (1-based); the last step repeats."""
        return timedelta(days=self.ladder_days[min(rung, len(self.ladder_days)) - 1])

    @property
    def forget_after(self) -> timedelta:
        return timedelta(days=self.forget_after_days)


class BreakerConfig(BaseModel):
    """A route's circuit breaker (SPEC R9)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    consecutive_failures: int = Field(default=5, ge=1)
    error_rate: float = Field(default=0.5, gt=0, le=1)
    window_s: float = Field(default=60.0, gt=0)
    min_volume: int = Field(default=10, ge=1)
    open_for_s: float = Field(default=30.0, ge=0)
    half_open_max_probes: int = Field(default=1, ge=1)


class Allowances(BaseModel):
    """Minimum seconds an attempt needs for each phase (SPEC R4)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect_s: float = Field(default=0.2, ge=0, description="Time an attempt needs to connect.")
    generation_s: float = Field(default=0.5, ge=0, description="Minimum time for a generation.")
    validation_s: float = Field(default=0.05, ge=0, description="Time kept for acceptance.")
    reserve_s: float = Field(
        default=0.25,
        ge=0,
        description="R13: kept for the gateway's own work, never given to an attempt (with the "
        "validation allowance, the write-up's 300 ms for the gateway and final validation).",
    )

    @property
    def required_s(self) -> float:
        """What an attempt needs of the deadline to start (R4), the reserve not included."""
        return self.connect_s + self.generation_s + self.validation_s


class RoutingConfig(BaseModel):
    """The router's retries and its upstream client (SPEC R3, R5); the object
    `routing.moves`, `routing.upstream` and `routing.exclusions` take whole."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backoff_base_s: float = Field(default=0.1, ge=0, description="R5: full-jitter base.")
    backoff_cap_s: float = Field(default=2.0, ge=0, description="R5: full-jitter cap.")
    same_route_retries: int = Field(
        default=1, ge=0, description="R5: same-route retries, only for early connection failures."
    )
    connect_timeout_s: float = Field(default=5.0, gt=0, description="Upstream connect bound.")
    ignore_ttl_s: float = Field(
        default=2.0,
        ge=0,
        description="The quarantine's provider.ignore is re-read this often (in the background).",
    )
    ignore_fetch_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Bound on one provider.ignore fetch (in the background, never on a "
        "request's path; a failed one keeps the last list).",
    )
    ignore_wait_s: float = Field(
        default=5.0,
        ge=0,
        description="R14: a request waits this long for its model's first provider.ignore list; "
        "then 503 quarantine_not_loaded (never routed without the quarantine).",
    )
    ignore_file: Path | None = Field(
        default=None,
        description="R14: the last provider.ignore lists, kept for a start with the source "
        "down; default <home>/gateway/ignore-lists.json.",
    )
    max_connections: int = Field(default=200, ge=1, description="Upstream connection pool.")
    # bounds on what an upstream can make the gateway hold (README: Security)
    max_error_body_bytes: int = Field(
        default=64_000,
        ge=1024,
        description="An upstream error body is read up to this; the rest is never read.",
    )
    max_line_bytes: int = Field(
        default=1_000_000,
        ge=1024,
        description="Longest upstream SSE line; a longer one is an invalid response (fallback).",
    )
    max_reply_bytes: int = Field(
        default=8_000_000,
        ge=1024,
        description="Largest upstream reply; a larger one is an invalid response (fallback).",
    )
    max_malformed_events: int = Field(
        default=3,
        ge=0,
        description=(
            "R15: SSE data events of one upstream reply that are not a JSON object, skipped and"
            " counted; one more is a malformed stream (a cut)."
        ),
    )
    contracts_dir: Path | None = Field(
        default=None,
        description="Contract directory; default: the shipped examples (routing/contracts).",
    )
    # attempt budgets from measured latency (R13, routing/budget.py, routing/latency.py)
    budget_percentile: float = Field(
        default=0.95, gt=0, lt=1, description="R13: the percentile an attempt's need is read at."
    )
    budget_headroom: float = Field(
        default=2.0, ge=1, description="R13: an attempt's need is its percentile times this."
    )
    fallback_share: float = Field(
        default=0.4,
        ge=0,
        lt=1,
        description="R13: at least this share of the deadline is kept for one fallback.",
    )
    ttft_floor_s: float = Field(
        default=1.0, gt=0, description="R13: a first-token budget is never cut below this."
    )
    stall_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="R13, R15: no byte for this long after the stream started (before or after"
        " release): a stall, cut.",
    )
    prefill_refusal_s: float = Field(
        default=3600.0,
        gt=0,
        description=(
            "R15: a route whose upstream refused a continuation's assistant prefill is not"
            " asked to continue a stream again for this long (its routes.yaml says it takes one)."
        ),
    )
    start_hold_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "R14: a streamed reply's start not settled this long after its first content"
            " (the start check holds it until then): a slow first token."
        ),
    )
    latency_window: int = Field(
        default=64, ge=1, description="R13: outcomes kept per workload, route and provider."
    )
    latency_window_s: float = Field(
        default=1800.0, gt=0, description="R13: outcomes older than this are forgotten."
    )
    latency_min_samples: int = Field(
        default=5, ge=1, description="R13: outcomes needed before measured beats the prior."
    )
    listing_refresh_s: float = Field(
        default=300.0, gt=0, description="R13: the gateway re-reads the endpoints listings."
    )
    listing_timeout_s: float = Field(
        default=2.5, gt=0, description="R13: bound on one endpoints-listing fetch."
    )
    max_listing_bytes: int = Field(
        default=5_000_000, ge=1024, description="R13: bound on one endpoints listing."
    )
    # R11: rising HTTP success together with rising validation rejection (routing/masking.py)
    masking_min_rise: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="R11: how much both rates must rise (later half over earlier) to warn.",
    )
    masking_window_s: float = Field(
        default=3600.0, gt=0, description="R11: the window /metrics judges the warning over."
    )
    masking_min_attempts: int = Field(
        default=10, ge=1, description="R11: attempts each half of the window needs to warn."
    )


class PassiveConfig(BaseModel):
    """Production traffic as evidence (SPEC O8): the gateway's window of its own verdicts on
    real replies per (model, provider), the suspect rule, the bounded local ejection and its
    event, and what the next round reads; the object `routing.passive`, `routing.ejection`,
    `routing.passive_watch` and `flows.production` take whole. The exact test and the minimum
    effect are the canary's peer comparison's (`ProbeConfig.peer_alpha`, `peer_min_effect`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_s: float = Field(
        default=600.0, gt=0, description="O8: the sliding window of production evidence."
    )
    min_requests: int = Field(
        default=20,
        ge=1,
        description="O8: judged replies a provider needs in the window before it can be suspect.",
    )
    eject: bool = Field(
        default=True,
        description="O8: eject a suspect provider locally (false: suspects are recorded and "
        "announced, nothing is ejected).",
    )
    eject_base_s: float = Field(
        default=30.0, gt=0, description="O8: the first ejection; the n-th lasts n times this."
    )
    eject_max_s: float = Field(default=300.0, gt=0, description="O8: the longest ejection.")
    eject_forget_s: float = Field(
        default=3600.0,
        gt=0,
        description="O8: a provider not ejected for this long starts the ladder again.",
    )
    max_ejected_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="O8: at most this share of a model's providers ejected at once (one is "
        "always allowed, the capacity floor permitting).",
    )
    event_every_s: float = Field(
        default=600.0,
        ge=0,
        description="O8: at most one suspect event (and one held record) per provider this often.",
    )
    round_window_s: float = Field(
        default=1800.0,
        gt=0,
        description="O8: a round shows the gateway's figures of this long before it.",
    )


class GatewayConfig(BaseModel):
    """The gateway's HTTP face: client keys and the bounds on what a client can make it hold
    (README: Security); the object `routing.gateway` and `routing.serving` take whole."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    keys: SecretCsvList = Field(
        default_factory=list,
        description="Bearer keys the gateway accepts from clients (never the upstream key).",
    )
    max_body_bytes: int = Field(
        default=2_000_000, ge=1024, description="Larger request bodies get HTTP 413."
    )
    keep_alive_s: float = Field(
        default=5.0, gt=0, description="An idle client connection is closed after this."
    )
    header_timeout_s: float = Field(
        default=10.0, gt=0, description="A client must send its request headers within this."
    )
    body_timeout_s: float = Field(
        default=30.0, gt=0, description="A client must send its request body within this (408)."
    )
    events_flush_s: float = Field(
        default=0.5, gt=0, description="The events ledger is written in batches this often."
    )

    @field_validator("keys", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)


class BudgetConfig(BaseModel):
    """The canary's own daily budget (SPEC C13); the object `quarantine.budget` takes whole.
    Without a budget the bill is still counted and forecast, and no round degrades."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    daily_usd: float | None = Field(
        default=None,
        gt=0,
        description="USD per model and day (`CANARY_DAILY_BUDGET_USD`); none: no cap.",
    )
    per_model_usd: dict[str, float] = Field(
        default_factory=dict,
        description='USD per day for named models, over `daily_usd`: {"author/slug": 2.5}.',
    )
    min_start_samples: int = Field(
        default=2,
        ge=0,
        description="A degraded round's fewest start samples: the smallest count at which "
        "the seed's 19/20 host is still suspended at its second round (probes/power.py).",
    )

    @field_validator("per_model_usd")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        bad = sorted(m for m, usd in value.items() if not usd > 0)
        if bad:
            raise ValueError(f"per_model_usd must be positive, not for {bad}")
        return value

    def for_model(self, model: str) -> float | None:
        """The daily budget of `model` in USD (None: no cap)."""
        return self.per_model_usd.get(model, self.daily_usd)


DAILY_BUDGET_ENV = "CANARY_DAILY_BUDGET_USD"


class _DailyBudgetAlias(PydanticBaseSettingsSource):
    """`CANARY_DAILY_BUDGET_USD` (environment or `.env`), the name operators know, sets
    `budget.daily_usd`; `CANARY_BUDGET__DAILY_USD` in the environment wins over it."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        env: PydanticBaseSettingsSource,
        dotenv: PydanticBaseSettingsSource,
    ) -> None:
        super().__init__(settings_cls)
        self._sources = (env, dotenv)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        for source in self._sources:
            value = getattr(source, "env_vars", {}).get(DAILY_BUDGET_ENV.lower())
            if value not in (None, ""):
                return {"budget": {"daily_usd": value}}
        return {}


class LedgerConfig(BaseModel):
    """How long the ledger keeps its rows (O9; `quarantine/adapters/retention.py`): the
    object `flows.retention.prune_ledger` and `canary ledger prune` take whole."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    retention_days: float = Field(
        default=30.0,
        gt=0,
        description="O9: ledger rows older than this are pruned (the daily `ledger-prune` "
        "deployment, `canary ledger prune`). 30 covers the daily report's window (7 days) "
        "with the 14 days of decisions it reads before it, and a month of history.",
    )
    prune_batch_rows: int = Field(
        default=5000, ge=1, description="Rows a prune deletes per transaction (per table)."
    )


# Names of earlier versions -> the name that replaced them (refused, never ignored).
RENAMED = {
    "CANARY_CAPACITY_FLOOR": "CANARY_POLICY__FLOOR",
    "CANARY_FAIL_ROUNDS_TO_SUSPEND": "CANARY_POLICY__FAIL_ROUNDS",
    "CANARY_CLEAN_ROUNDS_TO_REINSTATE": "CANARY_POLICY__CLEAN_ROUNDS",
    "CANARY_LADDER_DAYS": "CANARY_POLICY__LADDER_DAYS",
    "CANARY_FORGET_AFTER_DAYS": "CANARY_POLICY__FORGET_AFTER_DAYS",
    "CANARY_ROUTING_BREAKER_CONSECUTIVE": "CANARY_BREAKER__CONSECUTIVE_FAILURES",
    "CANARY_ROUTING_BREAKER_ERROR_RATE": "CANARY_BREAKER__ERROR_RATE",
    "CANARY_ROUTING_BREAKER_WINDOW_S": "CANARY_BREAKER__WINDOW_S",
    "CANARY_ROUTING_BREAKER_MIN_VOLUME": "CANARY_BREAKER__MIN_VOLUME",
    "CANARY_ROUTING_BREAKER_OPEN_S": "CANARY_BREAKER__OPEN_FOR_S",
    "CANARY_ROUTING_BREAKER_HALF_OPEN_PROBES": "CANARY_BREAKER__HALF_OPEN_MAX_PROBES",
    "CANARY_ROUTING_CONNECT_ALLOWANCE_MS": "CANARY_ALLOWANCES__CONNECT_S (seconds)",
    "CANARY_ROUTING_GENERATION_ALLOWANCE_MS": "CANARY_ALLOWANCES__GENERATION_S (seconds)",
    "CANARY_ROUTING_VALIDATION_ALLOWANCE_MS": "CANARY_ALLOWANCES__VALIDATION_S (seconds)",
    **{
        f"CANARY_{old}": f"CANARY_{new}"
        for old, new in {
            "TTFT_THRESHOLD_S": "PROBE__TTFT_THRESHOLD_S",
            "CONNECT_TIMEOUT_S": "PROBE__CONNECT_TIMEOUT_S",
            "PROBE_TOTAL_TIMEOUT_S": "PROBE__TOTAL_TIMEOUT_S",
            "PROBE_MAX_BYTES": "PROBE__MAX_BYTES",
            "PROBE_MAX_TOKENS": "PROBE__MAX_TOKENS",
            "START_SAMPLES": "PROBE__START_SAMPLES",
            "START_ANOMALY_MIN_REPLIES": "PROBE__START_ANOMALY_MIN_REPLIES",
            "START_ANOMALY_SHARE": "PROBE__START_ANOMALY_SHARE",
            "PEER_ALPHA": "PROBE__PEER_ALPHA",
            "PEER_MIN_EFFECT": "PROBE__PEER_MIN_EFFECT",
            "START_PEER_OUTLIER_ENFORCE": "PROBE__START_PEER_OUTLIER_ENFORCE",
            "PROBE_CONCURRENCY": "PROBE__CONCURRENCY",
            "ROUTING_CONNECT_TIMEOUT_S": "ROUTING__CONNECT_TIMEOUT_S",
            "ROUTING_BACKOFF_BASE_S": "ROUTING__BACKOFF_BASE_S",
            "ROUTING_BACKOFF_CAP_S": "ROUTING__BACKOFF_CAP_S",
            "ROUTING_IGNORE_TTL_S": "ROUTING__IGNORE_TTL_S",
            "ROUTING_IGNORE_FETCH_TIMEOUT_S": "ROUTING__IGNORE_FETCH_TIMEOUT_S",
            "ROUTING_MAX_CONNECTIONS": "ROUTING__MAX_CONNECTIONS",
            "ROUTING_MAX_ERROR_BODY_BYTES": "ROUTING__MAX_ERROR_BODY_BYTES",
            "ROUTING_MAX_LINE_BYTES": "ROUTING__MAX_LINE_BYTES",
            "ROUTING_MAX_REPLY_BYTES": "ROUTING__MAX_REPLY_BYTES",
            "ROUTING_CONTRACTS_DIR": "ROUTING__CONTRACTS_DIR",
            "GATEWAY_KEYS": "GATEWAY__KEYS",
            "GATEWAY_MAX_BODY_BYTES": "GATEWAY__MAX_BODY_BYTES",
            "GATEWAY_KEEP_ALIVE_S": "GATEWAY__KEEP_ALIVE_S",
            "GATEWAY_HEADER_TIMEOUT_S": "GATEWAY__HEADER_TIMEOUT_S",
            "GATEWAY_BODY_TIMEOUT_S": "GATEWAY__BODY_TIMEOUT_S",
        }.items()
    },
}


class RenamedSettingError(CanaryError, ValueError):
    """A setting was given under a name this version no longer reads."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        frozen=True,  # load_settings() hands one instance to every caller in the same env
        env_prefix="CANARY_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        validate_default=True,
        env_nested_delimiter="__",
    )

    # ---- general -------------------------------------------------------
    home: Path = Field(
        default=Path.home() / ".provider-canary",
        description="State directory (ledger database, local Prefect home, logs).",
    )
    base_url: str = Field(
        default=OPENROUTER_BASE_URL,
        description="OpenRouter-compatible API base URL (the local fleet: http://127.0.0.1:8600/api/v1).",
    )
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("CANARY_API_KEY", "OPENROUTER_API_KEY", "api_key"),
        description="Upstream API key; falls back to OPENROUTER_API_KEY.",
    )
    models: CsvList = Field(
        default_factory=lambda: [DEFAULT_MODEL],
        description="Models the canary watches (one deployment per model).",
    )
    locales: CsvList = Field(default_factory=lambda: list(DEFAULT_LOCALES))

    # ---- fleet/ ----------------------------------------------------------
    fleet_key: SecretStr = Field(
        default=SecretStr("fleet-local-key"),
        description="The bearer key the local fleet accepts.",
    )

    # ---- probes/ ---------------------------------------------------------
    probe: ProbeConfig = Field(default_factory=ProbeConfig)

    # ---- quarantine/ -------------------------------------------------------
    mode: Literal["observe", "enforce"] = "observe"
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    control_providers: CsvList = Field(default_factory=list)
    ledger_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the ledger; default sqlite:///<home>/ledger.db.",
    )
    ledger: LedgerConfig = Field(default_factory=LedgerConfig)

    # ---- flows/ ------------------------------------------------------------
    round_lock_wait_s: float = Field(
        default=120.0, gt=0, description="How long a round waits for the previous one of its model."
    )
    round_lease_s: float = Field(
        default=30.0,
        ge=2,
        le=60,
        description="Lease of a model's round lock, renewed every third of it: a killed round "
        "frees the lock within this time (quarantine/adapters/lease.py).",
    )
    blind_transport_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="A round where at least this share of endpoints ends frozen (transport) is "
        "blind: nothing applied, the run fails, admins are alerted (quarantine/blind.py).",
    )
    api_lost_after_s: float = Field(
        default=30.0,
        gt=0,
        description="A command gives up (exit 1) when the Prefect API stops answering this long.",
    )
    prefect_port: int = Field(
        default=4200, ge=1, le=65535, description="Port of the embedded local Prefect server."
    )
    round_cron: str = Field(
        default="*/30 * * * *",
        description="Schedule of the rounds (UTC); the bill's forecast counts its rounds a day.",
    )
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    notification_block: str | None = Field(
        default=None,
        description="Name of a Prefect notification block (e.g. a custom webhook) for admin alerts.",
    )

    # ---- routing/ ----------------------------------------------------------
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    allowances: Allowances = Field(default_factory=Allowances)
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    passive: PassiveConfig = Field(default_factory=PassiveConfig)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The usual sources, and `CANARY_DAILY_BUDGET_USD` after the environment."""
        alias = _DailyBudgetAlias(settings_cls, env_settings, dotenv_settings)
        return init_settings, env_settings, alias, dotenv_settings, file_secret_settings

    @field_validator("round_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        try:
            CronSim(value, datetime(2026, 1, 1, tzinfo=UTC))
        except CronSimError as exc:
            raise ValueError(f"not a cron expression ({exc})") from None
        return value

    @field_validator("models", "locales", "control_providers", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("locales")
    @classmethod
    def _known_locales(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(DEFAULT_LOCALES))
        if unknown:
            raise ValueError(
                f"unsupported locale(s) {unknown}; supported: {', '.join(DEFAULT_LOCALES)}"
            )
        if not value:
            raise ValueError("at least one locale is required")
        return value

    @property
    def resolved_ledger_url(self) -> str:
        return self.ledger_url or f"sqlite:///{self.home / 'ledger.db'}"

    @property
    def resolved_ignore_file(self) -> Path:
        """Where the gateway keeps its last provider.ignore lists (`routing.ignore_file`)."""
        return self.routing.ignore_file or self.home / "gateway" / "ignore-lists.json"


_built: tuple[object, Settings] | None = None  # (what it was built from, the settings)


def _sources() -> object:
    """Everything `Settings()` reads: the environment, the working directory and its `.env`
    file (changed when its size or modification time is)."""
    try:
        stat = os.stat(".env")
        env_file: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        env_file = None
    return (tuple(sorted(os.environ.items())), os.getcwd(), env_file)


def load_settings(**overrides: object) -> Settings:
    """Build settings; a bad value raises `pydantic.ValidationError` naming the variable,
    a setting under a replaced name `RenamedSettingError` naming the new one. Without
    overrides the last instance is handed out again while the environment, the working
    directory and `.env` are unchanged (a round asks many times; building costs ~3 ms)."""
    global _built
    old = sorted(name for name in RENAMED if name in os.environ)
    if old:
        raise RenamedSettingError(
            "; ".join(f"{name} is no longer read: use {RENAMED[name]}" for name in old)
        )
    if overrides:
        return Settings(**overrides)  # type: ignore[arg-type]
    sources = _sources()
    if _built is not None and _built[0] == sources:
        return _built[1]
    settings = Settings()
    _built = (sources, settings)
    return settings
