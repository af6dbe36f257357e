"""Typed errors of the probes client. Only *discovery* raises: a probe never
raises for provider behaviour (everything a provider does is data in a
`Transcript`).

    ProbeClientError                 base of everything raised here
    ├── ClientNotOpenError           the client was used outside `async with`
    ├── InvalidModelIdError          model id is not "author/slug"
    └── DiscoveryError               `discover(model)` could not list endpoints
        ├── ModelNotFoundError       HTTP 404 (unknown model)
        ├── DiscoveryAuthError       HTTP 401 / 403 (bad or missing key)
        ├── DiscoveryTransportError  connect/read failure, timeout, 408, 429, 5xx
        ├── DiscoveryHTTPError       any other non-200 status
        └── MalformedDiscoveryPayload 200 with a body that is not the documented shape

Messages never contain the API key: they are built here from status codes and
server messages that the client has already scrubbed of the key.
"""

from __future__ import annotations

from ground.errors import CanaryError


class ProbeClientError(CanaryError):
    """Base class of every error the probes client raises."""


class ClientNotOpenError(ProbeClientError):
    """The ProbeClient was used before `async with` opened it (or after it closed)."""


class InvalidModelIdError(ProbeClientError, ValueError):
    """A model id must look like "author/slug"."""


class DiscoveryError(ProbeClientError):
    """Listing the endpoints of a model failed; `status` is the HTTP status if any."""

    def __init__(
        self,
        model: str,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        self.model = model
        self.status = status
        self.retry_after_s = retry_after_s
        self.detail = message
        where = f" (HTTP {status})" if status is not None else ""
        super().__init__(f"discovery of {model!r} failed{where}: {message}")


class ModelNotFoundError(DiscoveryError):
    """HTTP 404: the aggregator does not know the model."""


class DiscoveryAuthError(DiscoveryError):
    """HTTP 401/403: the API key is missing, wrong or lacks permission."""


class DiscoveryTransportError(DiscoveryError):
    """The listing was unreachable: network error, timeout, 408, 429 or 5xx (retry later)."""


class DiscoveryHTTPError(DiscoveryError):
    """Any other non-200 status."""


class MalformedDiscoveryPayload(DiscoveryError):
    """HTTP 200 but the body is not the documented `{"data": {"endpoints": [...]}}` shape."""
