"""``ServiceState``: what one worker process holds: the facade, the catalogs, the memory store, models.

Built in the app's lifespan (start-up), closed at shutdown. The only state is caches and
connections: memories live in the configured store (PostgreSQL when replicas share them), so
any worker or replica can answer any request.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from shortlist._config import RuntimeConfig, load_runtime_config
from shortlist._config_sections import BreakerConfig
from shortlist._events import Event, add_event_hook, emit, remove_event_hook
from shortlist._types import Candidate
from shortlist.errors import ConfigError
from shortlist.selection._facade import DEFAULT, Shortlist
from shortlist.server._decisions import DecisionLog
from shortlist.server._metrics import ServiceMetrics
from shortlist.server._settings import ENV_INSTANCE, ServerSettings

if TYPE_CHECKING:
    from shortlist.embeddings._base import Embedder
    from shortlist.memory._store import MemoryStore
    from shortlist.retrieval._corpus import CorpusRetriever

__all__ = ["ServiceState", "WarmUpFailed", "open_memory_store"]

logger = logging.getLogger("shortlist.server")


#: Seconds between two retries of a failed warm-up (each started by a ``/readyz`` while it is failing).
WARM_UP_RETRY_S = 30.0


@dataclass(frozen=True, kw_only=True)
class WarmUpFailed(Event):
    """A bound selector's warm-up failed: ``/readyz`` answers 503 until a retry (``attempt``) succeeds."""

    name: ClassVar[str] = "server.warm_up_failed"
    area: ClassVar[str] = "server"
    level: int = logging.WARNING
    kind: str = ""
    selector: str = ""
    error: str = ""
    attempt: int = 1


def open_memory_store(url: str) -> MemoryStore:
    """Open the memory store named by ``url``.

    ``memory:`` is process-local (one worker, tests); ``sqlite:///PATH`` a SQLite file;
    ``postgresql://…`` a PostgreSQL database shared by every worker and replica.

    Raises:
        ConfigError: an unknown scheme.
    """
    if url in ("memory:", "memory://"):
        from shortlist.memory._store import InMemoryStore

        return InMemoryStore()
    if url.startswith("sqlite:///"):
        from shortlist.memory._sqlite import SqliteMemoryStore

        return SqliteMemoryStore(url[len("sqlite:///") :] or "shortlist-memory.db")
    if url.startswith(("postgresql://", "postgres://")):
        from shortlist.memory._postgres import PostgresMemoryStore

        return PostgresMemoryStore(url)
    raise ConfigError(f"unknown memory store {url!r}: use memory:, sqlite:///PATH or postgresql://...")


def _with_default_breakers(config: RuntimeConfig, settings: ServerSettings) -> RuntimeConfig:
    """``config`` with a circuit breaker on every external selector that has no ``breaker:`` of its own.

    The breaker is the library's (:class:`~shortlist.rankers._breaker.BreakerSelector`), built
    by the registry like every ``breaker:``; the service's default is ``--breaker-threshold``
    consecutive failures and ``--breaker-cooldown`` seconds (threshold 0: no default breaker).
    """
    if settings.breaker_threshold <= 0:
        return config
    default = BreakerConfig(failures=settings.breaker_threshold, cooldown_ms=settings.breaker_cooldown_s * 1000)
    selectors = {
        name: cfg.model_copy(update={"breaker": default})
        if cfg is not None and cfg.is_external and cfg.breaker is None
        else cfg
        for name, cfg in config.spec.selectors.items()
    }
    return config.model_copy(update={"spec": config.spec.model_copy(update={"selectors": selectors})})


def _corpus_retriever(settings: ServerSettings) -> CorpusRetriever | None:
    """The ``CorpusRetriever`` of ``settings.corpus_index`` (opened) or ``corpus_path`` (indexed now), or None.

    Raises:
        ConfigError: both are given.
    """
    if settings.corpus_index and settings.corpus_path:
        raise ConfigError("give --corpus (documents indexed at start-up) or --corpus-index (a built index), not both")
    from shortlist.retrieval._corpus import CorpusRetriever

    if settings.corpus_index:
        from shortlist.retrieval._backends.opening import open_index

        return CorpusRetriever(backend=open_index(settings.corpus_index), scoring=settings.corpus_scoring)
    if not settings.corpus_path:
        return None
    from shortlist.retrieval._loader import load_documents

    return CorpusRetriever(load_documents(settings.corpus_path), scoring=settings.corpus_scoring)


class ServiceState:
    """The per-process state of the service.

    Args:
        settings: the service settings.
    """

    def __init__(self, settings: ServerSettings) -> None:
        from shortlist.adapters._catalog import load_catalog

        self.settings = settings
        self.metrics = ServiceMetrics()
        self.ready = False
        #: this server's id in ``/readyz``: the ``shortlist serve`` command's (shared by its
        #: workers), else one of this process's own
        self.instance = os.environ.get(ENV_INSTANCE) or secrets.token_hex(16)
        config = load_runtime_config(settings.config_path) if settings.config_path else RuntimeConfig()
        self.shortlist = Shortlist(
            selector=settings.selector or DEFAULT,
            config=_with_default_breakers(config, settings),
            examples=settings.examples_path,
            # a recorded turn (POST /v1/feedback, another replica) is indexed on a thread: a request
            # never waits for the new index, it ranks with the previous examples meanwhile
            examples_refresh="background",
        )
        self.catalogs: dict[str, tuple[Candidate, ...]] = {
            name: tuple(load_catalog(path)) for name, path in settings.catalogs.items()
        }
        #: the recent decisions of the selection routes (``GET /decisions``)
        self.decisions = DecisionLog(catalogs=self.catalogs)
        self.memory: MemoryStore = open_memory_store(settings.memory_url)
        self.retriever: CorpusRetriever | None = _corpus_retriever(settings)
        self._embedder: Embedder | None = None
        self._embedder_lock = threading.Lock()
        self._hooked = False
        #: kind -> name of the selector ``/v1/select`` uses for it, once built and warmed
        self.bound_selectors: dict[str, str] = {}
        #: kind -> why its selector's warm-up failed (``/readyz`` answers 503 while any is here)
        self.warm_up_errors: dict[str, str] = {}
        self.warm_up_retry_s = WARM_UP_RETRY_S
        self._warm_up_attempts = 1
        self._warm_up_at = 0.0
        self._warm_up_lock = threading.Lock()
        self._warm_up_thread: threading.Thread | None = None

    def start(self) -> None:
        """Build and warm every bound selector and the feedback log's co-usage, hook the metrics; then
        start-up is done.

        The selectors ``/v1/select`` uses for tools and for skills are built (options checked,
        models and indexes loaded) and run once on each catalog, or on a two-item stand-in
        without one, so the first request pays nothing and ``/readyz`` only says ``ready`` once
        that is done. A warm-up that fails is a ``server.warm_up_failed`` event and start-up goes
        on (requests fall back, observably), but the service is not ready: ``/readyz`` answers 503
        with the error, and retries the warm-up in the background at most every
        ``warm_up_retry_s`` (:meth:`retry_warm_up`) until it succeeds.

        Raises:
            ConfigError: a bound selector cannot be built (bad options, missing model, ...).
        """
        add_event_hook(self.metrics.on_event)
        self._hooked = True
        started = time.perf_counter()
        for kind in ("tool", "skill"):
            selector = self.shortlist.selector_for(kind)  # builds and initialises; ConfigError if it cannot
            if selector is None:
                continue
            self.bound_selectors[kind] = selector.name
            if not selector.name.startswith("exec:"):
                self._warm(kind)
        # the bound feedback log's co-usage is counted now, not by the first offer (a large log is read
        # whole once; a log that cannot be read is an event, and the offers go on without it)
        self.shortlist.co_usage()
        self._warm_up_at = time.monotonic()
        logger.info("selectors built and warmed in %.2f s: %s", time.perf_counter() - started, self.bound_selectors)
        self.ready = True

    def _warm(self, kind: str) -> None:
        """Prepare ``kind``'s bound selector for each catalog (:meth:`Selector.prepare`); record (and
        report) or clear its failure. Without a catalog the selector prepares for none (its model)."""
        selector = self.shortlist.selector_for(kind)
        if selector is None:
            return
        for catalog in [c for c in self.catalogs.values() if c] or [()]:
            try:
                self.shortlist.prepare(self.shortlist.enrich(catalog, kind=kind), kind)
                # /v1/offer ranks a host's mcp__ tools too: prepare that rankable part when it differs
                offers = self.shortlist.for_tools() if kind == "tool" else self.shortlist
                pins = self.shortlist.policy.pins
                if any(pins.is_pinned(c.id) != offers.policy.pins.is_pinned(c.id) for c in catalog):
                    offers.prepare(offers.enrich(catalog, kind=kind), kind)
            except Exception as exc:  # a real request falls back and reports it; start-up goes on, not ready
                error = f"{type(exc).__name__}: {exc}"
                self.warm_up_errors[kind] = error
                emit(WarmUpFailed(kind=kind, selector=selector.name, error=error, attempt=self._warm_up_attempts))
                return
        self.warm_up_errors.pop(kind, None)

    def retry_warm_up(self) -> bool:
        """Start one background retry of the failed warm-ups, unless one runs or the last began under
        ``warm_up_retry_s`` ago; whether one started."""
        with self._warm_up_lock:
            if not self.ready or not self.warm_up_errors:
                return False
            if self._warm_up_thread is not None and self._warm_up_thread.is_alive():
                return False
            if time.monotonic() - self._warm_up_at < self.warm_up_retry_s:
                return False
            self._warm_up_at = time.monotonic()
            self._warm_up_attempts += 1
            kinds = list(self.warm_up_errors)

            def run() -> None:
                for kind in kinds:
                    self._warm(kind)
                if not self.warm_up_errors:
                    logger.info("warm-up retry %d succeeded: the service is ready", self._warm_up_attempts)

            self._warm_up_thread = threading.Thread(target=run, name="shortlist-warm-up", daemon=True)
            self._warm_up_thread.start()
            return True

    def selector_names(self) -> tuple[str, ...]:
        """Names a request may ask for (never ``exec:COMMAND``: a client must not run programs)."""
        return tuple(n for n in self.shortlist.registry.names if not n.startswith("exec:"))

    def embedder(self) -> Embedder:
        """The embedding model of the interop endpoints (the configured provider, else the default)."""
        with self._embedder_lock:
            if self._embedder is None:
                ctx_embedder = self.shortlist.registry._context().embeddings
                if ctx_embedder is None:
                    from shortlist.embeddings._default import default_embedder

                    ctx_embedder = default_embedder()
                self._embedder = ctx_embedder
            return self._embedder

    def close(self) -> None:
        """Stop selectors and workers, close the memory store, unhook the metrics."""
        self.ready = False
        if self._hooked:
            remove_event_hook(self.metrics.on_event)
            self._hooked = False
        try:
            self.shortlist.close()
        finally:
            self.memory.close()
