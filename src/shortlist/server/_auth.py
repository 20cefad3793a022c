"""Who may call: ``Authorization: Bearer KEY`` against the configured keys, or loopback only.

With no key configured the service answers loopback clients only (``shortlist serve`` also
refuses to bind a non-loopback address then). With keys, every ``/v1`` route needs one:
401 without a valid key. A key limited to memory scopes gets 403 for any other scope, and
the check runs before the store is touched.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from shortlist.server._errors import ApiError
from shortlist.server._settings import KeyPolicy, hash_key

__all__ = ["LOOPBACK_POLICY", "ApiKey", "authorize_scope", "is_loopback", "require_key"]

#: The policy of an unauthenticated loopback client when no key is configured.
LOOPBACK_POLICY = KeyPolicy(label="loopback")

_bearer = HTTPBearer(auto_error=False, description="An API key from SHORTLIST_API_KEYS or --api-keys-file.")


def is_loopback(host: str | None) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


async def require_key(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> KeyPolicy:
    """FastAPI dependency: the caller's :class:`KeyPolicy`, or 401/403.

    Raises:
        ApiError: 401 when keys are configured and none valid was sent; 403 for a non-loopback
            client when no key is configured.
    """
    keys: Mapping[str, KeyPolicy] = request.app.state.settings.api_keys
    if not keys:
        client = request.client.host if request.client else None
        if not is_loopback(client):
            raise ApiError(403, "forbidden", "no API key is configured: this server answers loopback clients only")
        return LOOPBACK_POLICY
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise _unauthorized("missing API key: send 'Authorization: Bearer KEY'")
    policy = keys.get(hash_key(credentials.credentials))
    if policy is None:
        raise _unauthorized("invalid API key")
    request.state.key_label = policy.label
    return policy


def authorize_scope(policy: KeyPolicy, scope: Mapping[str, str]) -> None:
    """Refuse (403) a memory scope outside what ``policy`` allows.

    Raises:
        ApiError: 403 when the key is limited to other scopes.
    """
    if not policy.allows(scope):
        raise ApiError(403, "forbidden_scope", "this API key may not access that memory scope")


#: A route parameter that receives the caller's :class:`KeyPolicy` (401/403 otherwise).
ApiKey = Annotated[KeyPolicy, Depends(require_key)]
