"""The service's circuit breaker around external selectors: the library's :class:`BreakerSelector`.

The breaker itself (closed, open, background probe, :class:`CircuitBreakerChanged` events) lives
in :mod:`shortlist.rankers._breaker`, so library, CLI and runtime users get it too, from
``breaker:`` in ``runtime.yaml``. The service gives every external selector without its own
``breaker:`` one with ``--breaker-threshold`` and ``--breaker-cooldown`` (see
:mod:`shortlist.server._state`). This module keeps the service's historical names.
"""

from __future__ import annotations

from shortlist.rankers._breaker import BreakerSelector, CircuitBreakerChanged
from shortlist.selection._base import Selector

__all__ = ["CircuitBreakerChanged", "CircuitBreakerSelector"]


class CircuitBreakerSelector(BreakerSelector):
    """:class:`~shortlist.rankers._breaker.BreakerSelector` under the service's argument names.

    Args:
        inner: the selector to protect (usually an external one).
        threshold: consecutive failures that open the breaker.
        cooldown_s: how long the breaker stays open before a background probe.
    """

    def __init__(self, inner: Selector, *, threshold: int = 3, cooldown_s: float = 5.0) -> None:
        super().__init__(inner, failures=threshold, cooldown_s=cooldown_s)

    @property
    def inner(self) -> Selector:
        """The protected selector."""
        return self.wrapped

    @property
    def threshold(self) -> int:
        """Consecutive failures that open the breaker."""
        return self.failures
