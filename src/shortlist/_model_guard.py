"""The switch that keeps test suites from calling real (paid) models, embedders and rerankers.

Requests are blocked inside pytest (``PYTEST_CURRENT_TEST`` is set) and inside
:func:`block_model_requests`; :func:`allow_model_requests` lifts the block for a context.
Every HTTP-backed model, embedder and ranker calls :func:`check_model_request` before it
sends anything: a loopback host (``127.0.0.0/8``, ``::1``, ``localhost``: a server the test
started) and an in-process test transport are always allowed; anything else raises
:class:`~shortlist.errors.ModelRequestBlocked`. The LLM judge refuses a model callable that
is not a declared test double (:func:`is_test_double`).

``shortlist.testing`` re-exports these names; production code imports them from here.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import os
from collections.abc import Iterator
from urllib.parse import urlsplit

from shortlist.errors import ModelRequestBlocked

__all__ = [
    "allow_model_requests",
    "block_model_requests",
    "check_model_request",
    "is_loopback_url",
    "is_test_double",
    "model_requests_blocked",
]

_override: contextvars.ContextVar[bool | None] = contextvars.ContextVar("shortlist_model_requests", default=None)


def model_requests_blocked() -> bool:
    """True when real model calls must not be made (inside pytest, or inside :func:`block_model_requests`)."""
    override = _override.get()
    if override is not None:
        return not override
    return "PYTEST_CURRENT_TEST" in os.environ


@contextlib.contextmanager
def block_model_requests() -> Iterator[None]:
    """Block real model calls in this context (thread/task) until the block exits."""
    token = _override.set(False)
    try:
        yield
    finally:
        _override.reset(token)


@contextlib.contextmanager
def allow_model_requests() -> Iterator[None]:
    """Allow real model calls in this context, even inside a test suite (use deliberately)."""
    token = _override.set(True)
    try:
        yield
    finally:
        _override.reset(token)


def is_test_double(obj: object) -> bool:
    """True when ``obj`` declares itself a test double (``shortlist_test_double = True``)."""
    return getattr(obj, "shortlist_test_double", False) is True


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is this machine (a loopback address or ``localhost``); no DNS lookup."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_model_request(url: str, *, who: str, test_double: bool = False) -> None:
    """Refuse a request to ``url`` while model requests are blocked, unless it stays on this machine.

    Args:
        url: where the request would go.
        who: what is asking (named in the error).
        test_double: the request goes through an in-process test transport, not the network.

    Raises:
        ModelRequestBlocked: requests are blocked and ``url`` is not a loopback host.
    """
    if test_double or is_loopback_url(url) or not model_requests_blocked():
        return
    raise ModelRequestBlocked(
        f"{who}: refusing a request to {urlsplit(url).hostname or url!r} inside a test suite (it may be a paid API); "
        "serve a stub on 127.0.0.1, use an httpx.MockTransport, or wrap the call in "
        "shortlist.testing.allow_model_requests()"
    )
