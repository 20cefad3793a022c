"""The selector contract: rank candidates for a query; the core decides what surfaces.

A :class:`Selector` owns only the ranking. The per-turn semantics (pins, fallback to
"include all eligible", observability) live in :mod:`shortlist.selection._narrowing`, so
a selector may simply raise when it cannot answer.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shortlist._types import Candidate, Query, Selection

if TYPE_CHECKING:
    from shortlist.embeddings._base import Embedder

__all__ = ["FunctionSelector", "Selector", "SelectorContext"]


@dataclass(frozen=True, slots=True)
class SelectorContext:
    """What :meth:`Selector.init` receives once, after configuration is resolved.

    Args:
        embeddings: the shared embedding provider (the first one declared in the runtime
            config, or one passed in code); it overrides a provider given to a selector's
            constructor, so RAG and selectors share one client.
    """

    embeddings: Embedder | None = None


class Selector(ABC):
    """Ranks candidates for a query. Must be safe for concurrent use.

    Subclasses implement :meth:`select`. :meth:`aselect` runs it in a worker thread unless
    overridden with a native coroutine. :meth:`init` is called exactly once before use by
    the registry; :meth:`prepare` warms it for a catalog ahead of a turn; :meth:`close`
    releases processes or connections.
    """

    #: The name the selector is registered and reported under.
    name: str = "selector"

    def init(self, ctx: SelectorContext) -> None:  # noqa: B027 - optional hook, no-op by default
        """Receive shared resources. Raising here aborts configuration with the selector's name."""

    @abstractmethod
    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Return the chosen candidate ids, best first.

        Raise (any exception) when no answer can be given: the turn then falls back.
        """

    async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Async twin of :meth:`select`."""
        return await asyncio.to_thread(self.select, query, candidates)

    def prepare(self, candidates: Sequence[Candidate]) -> None:  # noqa: B027 - optional hook, no-op by default
        """Do ahead of a turn, untimed, what ranking ``candidates`` first needs: the one warm-up.

        A ranker loads its model and indexes ``candidates`` (empty: a stand-in catalog, for
        the model alone); the default does nothing. The facade, the service, the exec daemon
        and the evaluation all warm a selector through this. Raises what loading raises.
        """

    def close(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Release resources (processes, connections). Idempotent."""

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await asyncio.to_thread(self.close)


class FunctionSelector(Selector):
    """Wrap a function ``(query, candidates) -> Selection | Sequence[str] | None`` as a selector."""

    def __init__(
        self,
        func: Callable[[Query, Sequence[Candidate]], Selection | Sequence[str] | None],
        *,
        name: str = "function",
    ) -> None:
        self._func = func
        self.name = name

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Call the wrapped function and normalise its answer to a :class:`Selection`."""
        out = self._func(query, candidates)
        if out is None:
            return Selection()
        if isinstance(out, Selection):
            return out
        if isinstance(out, str):
            raise TypeError(f"selector {self.name!r} returned a string; return a list of ids")
        return Selection(tuple(out))
