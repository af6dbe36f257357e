"""Checks the CLI makes before a flow run starts, so that an input or configuration mistake
ends with one line and the right exit code, and never as a Failed run (with a traceback) in
the audit history.

    BadInput       the operator can fix the command or the configuration: a model id
                   without a slash, a tag the model does not have, an `--until` in the
                   past, an `--at` in the future, no API key, an empty reason
    Unavailable    our runtime: the base URL does not answer, the model is unknown
                   upstream or to the canary

Their exit codes (2 and 1) are decided by class in the one table,
`canary.cli.errors.exit_codes`. The flows check the same things again (a run started from
the UI has no CLI in front of it); these functions only make the CLI say it first. The
pure checks take `now`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ground.clock import as_utc
from ground.errors import CanaryError
from ground.settings import Settings
from probes.client import ProbeClient
from probes.errors import (
    DiscoveryError,
    DiscoveryTransportError,
    InvalidModelIdError,
    ModelNotFoundError,
)
from probes.types import Endpoint
from quarantine.adapters.incidents import aread_runtime_layer, variable_name
from quarantine.adapters.store import aload_state
from quarantine.clock import future_at
from quarantine.exclusions import MAX_REASON_CHARS


class PreflightError(CanaryError):
    """A check failed before any flow run (exit code: `canary.cli.errors.exit_codes`)."""


class BadInput(PreflightError, ValueError):
    """Something the operator can fix in the command or the configuration (exit 2)."""


class Unavailable(PreflightError):
    """Our runtime: the base URL or the model is out of reach (exit 1)."""


# ---- pure checks -----------------------------------------------------------------------


def check_model_id(model: str) -> None:
    author, slash, slug = model.partition("/")
    if not author or not slash or not slug or "/" in slug or any(c.isspace() for c in model):
        raise BadInput(f"model id must look like 'author/slug', got {model!r}")


def check_at(at: datetime | None, now: datetime, *, allow_future: bool) -> None:
    if at is not None and not allow_future and future_at(at, now):
        raise BadInput(
            f"--at {as_utc(at):%Y-%m-%dT%H:%M}Z is more than one half-hour slot after now "
            f"({as_utc(now):%Y-%m-%dT%H:%M}Z); it would block every later round of the model. "
            "Pass --allow-future to replay a future slot on purpose"
        )


def check_until(until: datetime | None, now: datetime) -> None:
    if until is not None and as_utc(until) <= as_utc(now):
        raise BadInput(
            f"--until {as_utc(until):%Y-%m-%dT%H:%M:%S}Z is not in the future "
            f"(now {as_utc(now):%Y-%m-%dT%H:%M:%S}Z)"
        )


def check_reason(reason: str) -> None:
    if not reason.strip():
        raise BadInput("--reason must not be empty: say why (it is kept in the audit history)")
    if len(reason) > MAX_REASON_CHARS:
        raise BadInput(f"--reason is {len(reason)} characters; at most {MAX_REASON_CHARS}")


def check_upstream_config(settings: Settings) -> None:
    """The upstream key is set and the base URL is an http(s) URL."""
    if settings.api_key is None or not settings.api_key.get_secret_value().strip():
        raise BadInput(
            "no upstream API key: set CANARY_API_KEY (or OPENROUTER_API_KEY); for the local "
            "fleet it is CANARY_FLEET_KEY's value (default fleet-local-key)"
        )
    if not settings.base_url.startswith(("http://", "https://")):
        raise BadInput(f"CANARY_BASE_URL must be an http(s) URL, got {settings.base_url!r}")


def check_endpoints(model: str, wanted: Sequence[str], known: Sequence[Endpoint]) -> None:
    tags = sorted(e.tag for e in known)
    unknown = [t for t in wanted if t not in tags]
    if unknown:
        raise BadInput(
            f"unknown endpoint(s) {', '.join(unknown)} for {model}; known: {', '.join(tags)}"
        )


# ---- checks that read something --------------------------------------------------------


async def discover(settings: Settings, model: str) -> list[Endpoint] | None:
    """List `model`'s endpoints to check the base URL and the model; None when the listing
    answered with something the round itself must judge (our key refused, 5xx: a blind
    round, red and alerted, not a CLI error)."""
    url = settings.base_url
    try:
        async with ProbeClient.from_settings(settings) as client:
            return await client.discover(model)
    except InvalidModelIdError as exc:
        raise BadInput(str(exc)) from None
    except ModelNotFoundError:
        raise Unavailable(f"model {model!r} is not served at CANARY_BASE_URL={url}") from None
    except DiscoveryTransportError as exc:
        if exc.status is None:
            raise Unavailable(
                f"cannot reach CANARY_BASE_URL={url} ({exc.detail}); check the URL and network"
            ) from None
        return None
    except DiscoveryError:
        return None


async def check_known_tag(model: str, tag: str) -> None:
    """A tag (or base slug) the canary knows for `model`, when it knows any."""
    known = sorted((await aload_state(model)).providers)
    if not known or tag in known or any(k.split("/", 1)[0] == tag for k in known):
        return
    raise BadInput(
        f"{tag!r} matches no endpoint of {model} the canary knows ({', '.join(known)}); "
        "use --force to exclude it anyway"
    )


async def check_suspended_tag(model: str, tag: str, now: datetime) -> None:
    """`tag` is an endpoint of `model` (exit 2 if not) that is suspended at `now` (exit 1)."""
    state = await aload_state(model, missing_ok=False)
    if tag not in state.providers:
        known = ", ".join(sorted(state.providers)) or "none"
        raise BadInput(f"model {model!r} has no endpoint {tag!r} (known: {known})")
    if not state.providers[tag].suspended(now):
        raise Unavailable(
            f"endpoint {tag!r} of model {model!r} is not suspended at "
            f"{as_utc(now):%Y-%m-%dT%H:%M:%S}Z; nothing to lift"
        )


async def check_active_exclusion(model: str, tag: str, now: datetime) -> None:
    """`tag` has an active runtime exclusion for `model`."""
    layer = await aread_runtime_layer(model)
    active = sorted(e.tag for e in layer.entries if e.active(as_utc(now)))
    if tag not in active:
        raise BadInput(
            f"model {model!r} has no active runtime exclusion for {tag!r} "
            f"(active: {', '.join(active) or 'none'})"
        )


async def check_known_model(model: str, configured: Sequence[str]) -> None:
    """`model` is configured, or the canary has state or runtime exclusions for it."""
    if model in configured or (await aload_state(model)).revision > 0:
        return
    from prefect.variables import Variable

    if await Variable.aget(variable_name(model)) is not None:
        return
    raise Unavailable(
        f"unknown model {model!r}: not in CANARY_MODELS, no canary round has run for it and "
        "it has no runtime exclusions"
    )
