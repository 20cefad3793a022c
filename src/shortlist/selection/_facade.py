"""``Shortlist``: the one-object entry point that library users, the CLI and the server share.

It binds a catalog, a selector (by name, instance, or the runtime config's binding) and a
narrowing policy, and answers :meth:`Shortlist.select` with a
:class:`~shortlist.selection.TurnSelection` through :func:`~shortlist.selection.narrow`.

Around a turn the candidates carry the usage examples of a feedback log when one is bound
(``examples=`` or the config's ``selection.examples``), so every deployment gets them. A
deadline (``selection.timeout_ms``, a selector's ``timeout_ms``) is a
:class:`~shortlist.rankers._timeout.TimeoutSelector`, which also keeps a ranker's start-up
work (the model load, the catalog's embedding) outside it; :meth:`Shortlist.warm` does that
work ahead of the first turn.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from shortlist._config import RuntimeConfig, load_runtime_config
from shortlist._events import Event, EventHook, emit
from shortlist._types import Candidate, Query
from shortlist.errors import ConfigError
from shortlist.rankers._registry import DEFAULT_SELECTOR, SelectorRegistry
from shortlist.rankers._timeout import with_deadline
from shortlist.selection._base import Selector
from shortlist.selection._narrowing import (
    DEFAULT_PIN_NAMESPACES,
    NarrowingPolicy,
    PinPolicy,
    TurnSelection,
    anarrow,
    expand_tool_patterns,
    live_tool_policy,
    narrow,
    rankable_part,
)
from shortlist.selection._query import query_text
from shortlist.selection._refresh import EnrichedCatalogs, ExamplesRefresh

if TYPE_CHECKING:
    from shortlist.feedback._store import FeedbackStore
    from shortlist.selection._cousage import CoUsage

__all__ = ["DEFAULT", "FeedbackUnavailable", "Shortlist", "expand_tool_patterns", "policy_from_config"]


@dataclass(frozen=True, kw_only=True)
class FeedbackUnavailable(Event):
    """The bound feedback log could not be read; the turn went on without its examples or co-usage.

    ``what`` is ``examples`` (the candidates were ranked as they are) or ``co_usage`` (no companions).
    """

    name: ClassVar[str] = "selection.feedback_unavailable"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    what: str = ""
    error: str = ""


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: Use the config's binding for the kind, else the built-in default selector.
DEFAULT: Any = _Default()
_INHERIT: Any = _Default()

logger = logging.getLogger("shortlist.selection")


def policy_from_config(config: RuntimeConfig) -> NarrowingPolicy:
    """Build the :class:`NarrowingPolicy` that ``spec.selection`` describes."""
    sel = config.spec.selection
    namespaces = tuple(sel.pin_namespaces) if sel.pin_namespaces is not None else DEFAULT_PIN_NAMESPACES
    return NarrowingPolicy(
        pins=PinPolicy(namespaces=namespaces, always_include=tuple(sel.always_include)),
        order=sel.order,
        on_abstain=sel.on_abstain,
        timeout_s=sel.timeout_ms / 1000 if sel.timeout_ms else None,
    )


class Shortlist:
    """Narrow a catalog per turn.

    Args:
        catalog: the eligible candidates (a sequence, or a path for
            :func:`~shortlist.adapters.load_catalog`); may be given per call instead.
        selector: a :class:`Selector`, a selector name (built-in type, config entry, or
            ``exec:COMMAND``), ``None`` for no selector, or :data:`DEFAULT`.
        config: a :class:`RuntimeConfig` or the path of a ``runtime.yaml``.
        selectors: selectors registered in code, by name.
        policy: the narrowing policy (default: from the config's ``spec.selection``).
        kind: the default kind of query (``"tool"`` or ``"skill"``).
        on_event: a hook called with every event of this object's turns.
        examples: a feedback log (a :class:`~shortlist.feedback.FeedbackStore` or its file)
            whose logged queries enrich the candidates as usage examples (default: the
            config's ``selection.examples``, relative to the config file; None: none).
        examples_refresh: when the log changed, ``"sync"`` (default) ranks the turn with the new
            examples at once, building their index in the turn; ``"background"`` (what ``shortlist
            serve`` uses) ranks with the previous ones while a thread builds it
            (:mod:`shortlist.selection._refresh`, a ``selection.examples_refreshed`` event).
    """

    def __init__(
        self,
        catalog: Sequence[Candidate] | str | Path | None = None,
        *,
        selector: Selector | str | None = DEFAULT,
        config: RuntimeConfig | str | Path | None = None,
        selectors: Mapping[str, Selector] | None = None,
        policy: NarrowingPolicy | None = None,
        kind: str = "tool",
        on_event: EventHook | None = None,
        examples: FeedbackStore | str | Path | None = None,
        examples_refresh: ExamplesRefresh = "sync",
    ) -> None:
        source = None
        if isinstance(config, (str, Path)):
            source = str(config)
            config = load_runtime_config(config)
        self.config = config or RuntimeConfig()
        _apply_cache_config(self.config)
        self.registry = SelectorRegistry(self.config, selectors=selectors, source=source)
        self.policy = policy or policy_from_config(self.config)
        self.kind = kind
        self._hooks: tuple[EventHook, ...] = (on_event,) if on_event else ()
        if isinstance(catalog, (str, Path)):
            from shortlist.adapters._catalog import load_catalog

            catalog = load_catalog(catalog)
        self.catalog: tuple[Candidate, ...] = tuple(catalog or ())
        self._selector_arg = selector
        self._owns_registry = True
        self._owns_examples = False
        self.examples: FeedbackStore | None = None
        configured = self.config.spec.selection.examples
        if examples is None and configured:
            from shortlist.feedback._store import is_postgres_url

            if is_postgres_url(configured):  # a URL, not a path relative to the config file
                examples = configured
            else:
                where = Path(configured).expanduser()
                if source is not None and not where.is_absolute():
                    where = Path(source).parent / where
                examples = where
        if examples is not None:
            if isinstance(examples, (str, Path)):
                from shortlist.feedback._store import FeedbackStore, is_postgres_url

                # a file must exist (a mistyped path is an error, not a new empty log); a PostgreSQL
                # log is a URL, its tables created when missing
                if not is_postgres_url(examples) and not Path(examples).is_file():
                    raise ConfigError(
                        f"examples: {examples}: no such feedback log (fill one with "
                        "`shortlist feedback add|import --db PATH`)",
                        source=source,
                    )
                self.examples, self._owns_examples = FeedbackStore(examples), True
            else:
                self.examples = examples
        self._enriched = EnrichedCatalogs(self.prepare, mode=examples_refresh, hooks=self._hooks)
        self._live: Shortlist | None = None

    def selector_for(self, kind: str) -> Selector | None:
        """The selector used for ``kind`` (resolved and initialised on first use)."""
        arg = self._selector_arg
        if arg is None or isinstance(arg, Selector):
            return arg
        if isinstance(arg, str):
            return self.registry.get(arg)
        bound = self.registry.skills_selector() if kind == "skill" else self.registry.tool_selector()
        return bound or self.registry.get(DEFAULT_SELECTOR)

    def check_selectors(self) -> None:
        """Raise now if a selector this binding names does not resolve (nothing is built or loaded).

        Raises:
            ConfigError: no selector has that name (the message suggests the nearest).
        """
        arg = self._selector_arg
        if arg is None or isinstance(arg, Selector):
            return
        if isinstance(arg, str):
            self.registry.check(arg)
        else:  # the config's bindings, as selector_for resolves them
            spec = self.registry.config.spec
            names = [spec.tool_selector, spec.skills.selector if spec.skills else None]
            for name in [*[n for n in names if n], DEFAULT_SELECTOR]:
                self.registry.check(name)

    def tool_policy(self) -> NarrowingPolicy:
        """This binding's policy for tools of live sources (runtime, MCP proxy, service).

        Live MCP tools are narrowed like any tool; only wildcard entries (``mcp__srv__*``) pin
        a server's tools (see :func:`~shortlist.selection._narrowing.live_tool_policy`).
        """
        return live_tool_policy(self.policy)

    def for_tools(self) -> Shortlist:
        """This binding as a conversation's tool offer narrows: under :meth:`tool_policy`.

        Itself when its policy already is that; else a sibling (:meth:`derive`) made once and kept: its
        turns prepare the selector for what they rank under that policy, and :meth:`refresh_examples`
        refreshes its examples with this binding's.
        A host's tools named ``mcp__server__tool`` are then ranked like any tool, not pinned, by
        every offer path: :class:`~shortlist.offer.ToolSession`, ``POST /v1/offer``, ``shortlist
        offer`` and the conversation replay of ``shortlist eval``.
        """
        live = self.tool_policy()
        if live == self.policy:
            return self
        twin = self._live
        if twin is None or twin.policy != live:  # made again if this binding's policy was replaced
            twin = self.derive(policy=live)
            self._live = twin
        return twin

    def derive(
        self,
        *,
        selector: Selector | str | None = _INHERIT,
        policy: NarrowingPolicy | None = None,
        kind: str | None = None,
        catalog: Sequence[Candidate] | None = None,
    ) -> Shortlist:
        """A sibling binding over the same config and selector registry (nothing is re-initialised).

        Unset arguments are inherited. The runtime binds its tool and skill selectors this way:
        one registry, so a selector named twice is built once. Closing the sibling closes
        nothing; close the parent.
        """
        twin = copy.copy(self)  # every attribute shared, so one added later is inherited too
        twin.policy = policy or self.policy
        twin.kind = kind or self.kind
        twin.catalog = tuple(self.catalog if catalog is None else catalog)
        twin._selector_arg = self._selector_arg if selector is _INHERIT else selector
        twin._owns_registry = False  # the parent closes what it opened
        twin._owns_examples = False
        # its own enriched catalogs: a refresh prepares the twin's selector, under the twin's policy
        twin._enriched = EnrichedCatalogs(twin.prepare, mode=self._enriched.mode, hooks=twin._hooks)
        twin._live = None  # its own live sibling, made on first use
        return twin

    def _query(self, query: str | Query | Sequence[Mapping[str, Any]], kind: str | None, k: int | None) -> Query:
        if isinstance(query, Query):
            return query
        return Query(
            text=query_text(query), kind=kind or self.kind, k=k if k is not None else self.config.spec.selection.k
        )

    def select(
        self,
        query: str | Query | Sequence[Mapping[str, Any]],
        candidates: Sequence[Candidate] | None = None,
        *,
        kind: str | None = None,
        k: int | None = None,
        hooks: Sequence[EventHook] = (),
    ) -> TurnSelection:
        """Decide what surfaces for this turn.

        Args:
            query: the user's text, a :class:`Query`, or the conversation's messages (the
                latest user message is used).
            candidates: the eligible candidates this turn (default: the bound catalog).
            kind: ``"tool"`` or ``"skill"`` (default: this object's kind).
            k: the most ids to surface besides pins (0: the selector's default).
            hooks: extra event hooks for this call (besides this object's ``on_event``).
        """
        q = self._query(query, kind, k)
        selector = self.selector_for(q.kind)
        cands = self._candidates(candidates, q.kind)
        return narrow(selector, q, cands, self.policy, hooks=(*self._hooks, *hooks))

    async def aselect(
        self,
        query: str | Query | Sequence[Mapping[str, Any]],
        candidates: Sequence[Candidate] | None = None,
        *,
        kind: str | None = None,
        k: int | None = None,
        hooks: Sequence[EventHook] = (),
    ) -> TurnSelection:
        """Async twin of :meth:`select`."""
        q = self._query(query, kind, k)
        selector = self.selector_for(q.kind)
        cands = self._candidates(candidates, q.kind)
        return await anarrow(selector, q, cands, self.policy, hooks=(*self._hooks, *hooks))

    def enrich(self, candidates: Sequence[Candidate], *, kind: str | None = None) -> Sequence[Candidate]:
        """``candidates`` with the bound feedback log's usage examples (themselves when none is bound, and
        when the log cannot be read: a ``selection.feedback_unavailable`` event)."""
        if self.examples is not None and candidates:
            fresh = self._logged(self.examples, candidates, kind)
            if fresh is None:  # a log that is down costs the turn its examples, never the turn
                return candidates
            return self._enriched.serve(kind or self.kind, candidates, fresh)
        return candidates

    def _logged(
        self, log: FeedbackStore, candidates: Sequence[Candidate], kind: str | None
    ) -> Sequence[Candidate] | None:
        """``candidates`` with ``log``'s usage examples now; None when it cannot be read (a
        ``selection.feedback_unavailable`` event)."""
        try:
            return log.enrich(candidates, kind=kind)
        except Exception as exc:  # the caller goes on without the examples
            emit(FeedbackUnavailable(what="examples", error=f"{type(exc).__name__}: {exc}"), hooks=self._hooks)
            return None

    def refresh_examples(self, candidates: Sequence[Candidate] | None = None, *, kind: str | None = None) -> bool:
        """Index the bound feedback log's new examples for ``candidates`` (default: the catalog) now, on a
        thread. Call it right after writing to the log (the runtime's conversation does, after each
        turn it records): the next turn then finds the new index built instead of building
        it (about 0.1 s at 10,000 tools, 0.5 s with a 100,000-turn log). Until it is done a
        ``"background"`` turn ranks with the previous examples and a ``"sync"`` one waits for it.

        ``candidates`` must be the object the turns rank (the same tuple from turn to turn). Returns
        whether a refresh was started: False without a bound log, when nothing changed, or when one is
        under way (a newer change is prepared after it). A log that cannot be read is a
        ``selection.feedback_unavailable`` event. Each refresh is a ``selection.examples_refreshed``
        event (``reason`` ``write``).
        """
        source = self.catalog if candidates is None else candidates
        if self.examples is None or not source:
            return False
        kind = kind or self.kind
        fresh = self._logged(self.examples, source, kind)
        if fresh is None:
            return False
        started = self._enriched.refresh(kind, source, fresh)
        live = self._live  # the offer's sibling (mcp__ tools ranked) has the same log: refreshed with it
        if live is not None and live._enriched.serves(kind, source):
            started = live._enriched.refresh(kind, source, fresh) or started
        return started

    def co_usage(self, *, kind: str = "tool") -> CoUsage | None:
        """The tools the bound feedback log's turns used together (None when no log is bound).

        The log's table (:meth:`~shortlist.feedback.FeedbackStore.co_usage`), shared and frozen:
        a conversation's prefetch and searches bring a likely tool's usual companions from it
        (:class:`~shortlist.offer.ToolSession`, ``POST /v1/offer``), and a conversation that learns
        from its own calls teaches a table layered on it.

        A log that cannot be read is a ``selection.feedback_unavailable`` event and no table.
        """
        if self.examples is None:
            return None
        try:
            return self.examples.co_usage(kind=kind)
        except Exception as exc:  # a log that is down costs the offer its companions, never the turn
            emit(FeedbackUnavailable(what="co_usage", error=f"{type(exc).__name__}: {exc}"), hooks=self._hooks)
            return None

    def _candidates(self, candidates: Sequence[Candidate] | None, kind: str | None = None) -> Sequence[Candidate]:
        return self.enrich(self.catalog if candidates is None else candidates, kind=kind)

    def warm(self, candidates: Sequence[Candidate] | None = None, *, kind: str | None = None) -> None:
        """Build the selector for ``kind`` and prepare it for ``candidates`` (default: the catalog).

        The selector's :meth:`~shortlist.selection._base.Selector.prepare` runs untimed: a
        built-in ranker loads its model and indexes the candidates; other selectors are only
        built. Raises what building raises (:class:`~shortlist.errors.ConfigError`); a failing
        warm-up is logged, and the turn that follows falls back observably as it would anyway.
        """
        kind = kind or self.kind
        if self.selector_for(kind) is None:  # raises what building raises
            return
        cands = tuple(self._candidates(candidates, kind))
        if not cands:
            return
        try:
            self.prepare(cands, kind)
        except Exception as exc:  # the timed turn reports it (a fallback event); warming is best effort
            logger.debug("warm-up of the %s selector failed: %s", kind, exc)

    def prepare(self, candidates: Sequence[Candidate], kind: str | None = None) -> None:
        """Prepare the ``kind`` selector for exactly what a turn over ``candidates`` hands it: their
        rankable part (duplicate ids and pinned candidates left out), so the turn finds it prepared.

        ``candidates`` are taken as they are (enrich them first: :meth:`enrich`); none prepares the
        selector's model alone. Unlike :meth:`warm`, raises what preparing raises.
        """
        kind = kind or self.kind
        selector = self.selector_for(kind)
        if selector is None:
            return
        if not candidates:
            selector.prepare(())
            return
        rankable = rankable_part(candidates, self.policy)
        if not rankable:
            return
        # under the policy's deadline, as a turn is: the turn then knows this catalog is prepared
        with_deadline(selector, self.policy.timeout_s).prepare(rankable)

    @property
    def hooks(self) -> tuple[EventHook, ...]:
        """This binding's own event hooks (its ``on_event``), for code that emits on its behalf."""
        return self._hooks

    def close(self) -> None:
        """Close the selectors this object built (external processes, connections)."""
        if self._owns_registry:
            self.registry.close()
        if self._owns_examples and self.examples is not None:
            self.examples.close()

    def __enter__(self) -> Shortlist:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _apply_cache_config(config: RuntimeConfig) -> None:
    """Make the config's ``spec.cache`` (directory, bound) this process's embedding cache settings."""
    cache = config.spec.cache
    if cache is None or (cache.dir is None and cache.max_mb is None):
        return
    from shortlist.embeddings._cache import configure_cache

    configure_cache(directory=cache.dir, max_mb=cache.max_mb)
