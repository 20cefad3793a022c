"""Catalog enrichment: the host's model writes example requests for each tool, once per tool version.

:class:`CatalogEnricher` asks a model (a :class:`~shortlist.runtime._model.ChatModel` such as
any OpenAI-compatible endpoint, or a ``prompt -> str`` callable as the LLM judge takes) for
``examples`` short, varied user requests per tool, and stores them through
:class:`~shortlist.enrichment._store.EnrichmentStore`: cached by the tool's content hash and
the model's identity, and recorded in the feedback log as the tool's examples, which every
ranker indexes with the description. Tools whose version is cached cost nothing.

Requests run ``concurrency`` at a time, ``tools_per_request`` tools each (1 by default, so
one tool's description can never steer another tool's requests); a failed or unusable
answer is retried with exponential backoff; progress goes to :mod:`shortlist._progress` (the
CLI draws it on stderr); the
report counts the tokens the provider reported (or an estimate, chars / 4, for a callable
that returns only text). Requests that do not read as requests for their tool (they name
another tool of the catalog, or address the assistant's instructions) are dropped and counted
(:mod:`shortlist.enrichment._screen`). Each retry, failure, rejected output, dropped request
and the summary is an event.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from shortlist._events import Event, emit
from shortlist._model_guard import is_test_double, model_requests_blocked
from shortlist._progress import report as progress_report
from shortlist._tokens import estimate_tokens
from shortlist._types import Candidate
from shortlist.enrichment._model import PromptModel, answer_text, answer_usage, model_name, resolve_model
from shortlist.enrichment._prompt import build_prompt, content_hash, parse_answer
from shortlist.enrichment._report import EnrichmentReport
from shortlist.enrichment._screen import RequestScreen
from shortlist.enrichment._store import EnrichmentStore, GeneratedSet
from shortlist.errors import ConfigError, ModelError
from shortlist.runtime._model import ChatModel

__all__ = [
    "DEFAULT_EXAMPLES",
    "CatalogEnricher",
    "EnrichmentCompleted",
    "EnrichmentFailed",
    "EnrichmentOutputRejected",
    "EnrichmentReport",
    "EnrichmentRequestsDropped",
    "EnrichmentRetry",
    "PromptModel",
    "enrich_catalog",
]

#: Requests asked for per tool unless told otherwise (one example per tool hurts; ten help most per token).
DEFAULT_EXAMPLES = 10
#: The fewest usable requests an answer must give for a tool, else it is retried.
MIN_USABLE = 2


_SYSTEM = "You write realistic example user requests for a tool catalog. You answer with JSON only."


@dataclass(frozen=True, kw_only=True)
class EnrichmentRetry(Event):
    """An enrichment request failed or gave an unusable answer; it is retried after ``delay_s``."""

    name: ClassVar[str] = "enrichment.retry"
    area: ClassVar[str] = "enrichment"
    level: int = logging.WARNING
    model: str = ""
    tools: tuple[str, ...] = ()
    attempt: int = 0
    delay_s: float = 0.0
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class EnrichmentFailed(Event):
    """Tools got no generated examples: every attempt failed; they keep their description (and older examples)."""

    name: ClassVar[str] = "enrichment.failed"
    area: ClassVar[str] = "enrichment"
    level: int = logging.WARNING
    model: str = ""
    tools: tuple[str, ...] = ()
    attempts: int = 0
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class EnrichmentOutputRejected(Event):
    """Items of a model's answer were dropped (not text, markup or links, too short or long, repeats, surplus)."""

    name: ClassVar[str] = "enrichment.output_rejected"
    area: ClassVar[str] = "enrichment"
    level: int = logging.INFO
    model: str = ""
    tools: tuple[str, ...] = ()
    rejected: int = 0


@dataclass(frozen=True, kw_only=True)
class EnrichmentRequestsDropped(Event):
    """Generated requests that do not read as requests for their tool were dropped (see ``enrichment/_screen.py``).

    ``reasons`` are ``names_other_tool`` (the request names another tool of the catalog) and
    ``addresses_instructions`` (it addresses the assistant's instructions instead of asking for
    a task); ``sample`` is the first dropped request, cut to 200 characters.
    """

    name: ClassVar[str] = "enrichment.requests_dropped"
    area: ClassVar[str] = "enrichment"
    level: int = logging.WARNING
    model: str = ""
    tool: str = ""
    dropped: int = 0
    reasons: tuple[str, ...] = ()
    sample: str = ""


@dataclass(frozen=True, kw_only=True)
class EnrichmentCompleted(Event):
    """An enrichment run finished: tools generated, cached, failed, and the tokens it spent."""

    name: ClassVar[str] = "enrichment.completed"
    area: ClassVar[str] = "enrichment"
    level: int = logging.INFO
    model: str = ""
    tools: int = 0
    generated: int = 0
    cached: int = 0
    failed: int = 0
    requests: int = 0
    dropped: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_tokens: bool = False


class CatalogEnricher:
    """Generates and stores example requests for a catalog's tools with the host's model.

    Args:
        model: a :class:`ChatModel` (e.g. ``OpenAIChatModel`` for any OpenAI-compatible
            endpoint), a ``prompt -> str`` callable (sync, async, or with an async ``acall``),
            or ``"module:attribute"`` naming either.
        store: where sets are cached and recorded (an :class:`EnrichmentStore`).
        examples: requests asked for per tool (default 10; at least 2).
        concurrency: requests in flight at once.
        tools_per_request: tools described in one request (batching saves the template's tokens,
            but lets one tool's text sit beside another's; 1 keeps every tool alone).
        retries: further attempts after a failed or unusable answer.
        backoff_s: the first retry's delay; doubled each attempt (with jitter), at most ``max_backoff_s``.
        max_backoff_s: the longest delay between attempts.
        temperature: sampling temperature sent to a chat endpoint (variety helps).
        max_tokens: the answer's token limit sent to a chat endpoint (default 60 per request asked).
        model_id: the identity the cache is keyed by (default: the chat model's name, or the
            callable's ``model`` attribute or qualified name).
        allow_model_requests: call a real (non-test-double) callable even inside a test suite.
    """

    def __init__(
        self,
        model: ChatModel | PromptModel | str,
        *,
        store: EnrichmentStore,
        examples: int = DEFAULT_EXAMPLES,
        concurrency: int = 4,
        tools_per_request: int = 1,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        temperature: float = 0.8,
        max_tokens: int | None = None,
        model_id: str | None = None,
        allow_model_requests: bool = False,
    ) -> None:
        if examples < 2:
            raise ConfigError("enrichment needs at least 2 examples per tool (one example per tool hurts ranking)")
        if concurrency < 1 or tools_per_request < 1 or retries < 0 or backoff_s < 0 or max_backoff_s < 0:
            raise ConfigError("concurrency and tools_per_request must be >= 1, retries and backoff >= 0")
        self.model = resolve_model(model)
        self.store = store
        self.examples = examples
        self.concurrency = concurrency
        self.tools_per_request = tools_per_request
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.model_id = model_id or model_name(self.model)
        self.allow_model_requests = allow_model_requests

    def _check_model(self) -> None:
        m = self.model
        if isinstance(m, ChatModel):
            return  # HTTP models refuse non-loopback hosts under pytest themselves
        if model_requests_blocked() and not self.allow_model_requests and not is_test_double(m):
            raise ModelError(
                "catalog enrichment: refusing to call a real model inside a test suite; inject a test double "
                "(shortlist.testing.ScriptedModel) or pass allow_model_requests=True"
            )

    async def _ask(self, prompt: str) -> tuple[str, tuple[int, int] | None]:
        m = self.model
        if isinstance(m, ChatModel):
            request: dict[str, Any] = {
                "model": m.model,
                "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}],
                "temperature": self.temperature,
                "max_tokens": self.max_tokens or 60 * self.examples * self.tools_per_request + 50,
            }
            body = await m.acomplete(request)
            return answer_text(body), answer_usage(body)
        acall = getattr(m, "acall", None)
        if acall is not None and inspect.iscoroutinefunction(acall):
            out: Any = await acall(prompt)
        elif inspect.iscoroutinefunction(m):
            out = await m(prompt)
        else:
            out = await asyncio.to_thread(m, prompt)
            if inspect.isawaitable(out):
                out = await out
        if not isinstance(out, str):
            raise ModelError(f"the enrichment model returned {type(out).__name__}, not text")
        return out, None

    def pending(self, candidates: Sequence[Candidate], *, force: bool = False) -> list[Candidate]:
        """The candidates this model has no cached set for (all of them with ``force``)."""
        out = []
        for c in candidates:
            if force or self.store.get(c.id, content_hash(c), self.model_id) is None:
                out.append(c)
        return out

    def enrich(self, candidates: Sequence[Candidate], *, force: bool = False) -> EnrichmentReport:
        """Blocking twin of :meth:`aenrich` (runs its own event loop; not from inside a running loop)."""
        return asyncio.run(self.aenrich(candidates, force=force))

    async def aenrich(self, candidates: Sequence[Candidate], *, force: bool = False) -> EnrichmentReport:
        """Generate the missing sets for ``candidates`` and record them; return what it did and cost.

        Cached tools are re-synced into the feedback log (cheap, idempotent) but not asked about.
        A tool whose every attempt fails is reported (and an :class:`EnrichmentFailed` event) and
        keeps whatever examples it had; the run never raises for one tool.

        Raises:
            ModelError: a real callable model inside a test suite (see ``allow_model_requests``).
        """
        self._check_model()
        start = time.perf_counter()
        unique = list({c.id: c for c in candidates}.values())
        report = EnrichmentReport(model=self.model_id, tools=len(unique))
        screen = RequestScreen.build(unique)
        todo = self.pending(unique, force=force)
        todo_ids = {c.id for c in todo}
        for c in unique:
            if c.id not in todo_ids:
                cached = self.store.get(c.id, content_hash(c), self.model_id)
                if cached is not None:
                    await asyncio.to_thread(self.store.sync, cached)
                    report.cached += 1
        batches = [todo[i : i + self.tools_per_request] for i in range(0, len(todo), self.tools_per_request)]
        sem = asyncio.Semaphore(self.concurrency)
        task = f"enriching tools ({self.model_id})"
        done = 0
        if todo:
            progress_report(task, 0, len(todo))

        async def run(batch: list[Candidate]) -> None:
            nonlocal done
            async with sem:
                await self._run_batch(batch, report, screen)
            done += len(batch)
            progress_report(task, done, len(todo))

        try:
            await asyncio.gather(*(run(b) for b in batches))
        finally:
            if todo:
                progress_report(task, -1, len(todo))
        report.seconds = time.perf_counter() - start
        emit(
            EnrichmentCompleted(
                model=self.model_id,
                tools=report.tools,
                generated=report.generated,
                cached=report.cached,
                failed=report.failed,
                requests=report.requests,
                dropped=report.dropped,
                prompt_tokens=report.prompt_tokens,
                completion_tokens=report.completion_tokens,
                estimated_tokens=report.estimated_tokens,
            )
        )
        return report

    async def _run_batch(self, batch: list[Candidate], report: EnrichmentReport, screen: RequestScreen) -> None:
        remaining = list(batch)
        error = ""
        attempts = 0
        for attempt in range(self.retries + 1):
            attempts = attempt + 1
            if attempt:
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
                report.retries += 1
                emit(
                    EnrichmentRetry(
                        model=self.model_id,
                        tools=tuple(c.id for c in remaining),
                        attempt=attempt,
                        delay_s=round(delay, 3),
                        error=error[:300],
                    )
                )
                await asyncio.sleep(delay)
            prompt = build_prompt(remaining, self.examples)
            try:
                text, usage = await self._ask(prompt)
            except Exception as exc:  # a failing model is retried, then reported; never a crash
                error = f"{type(exc).__name__}: {exc}"
                report.requests += 1
                continue
            report.requests += 1
            if usage is None:
                usage = (estimate_tokens(len(_SYSTEM) + len(prompt)), estimate_tokens(text))
                report.estimated_tokens = True
            report.prompt_tokens += usage[0]
            report.completion_tokens += usage[1]
            parsed = parse_answer(text, remaining, self.examples)
            if parsed.rejected:
                emit(
                    EnrichmentOutputRejected(
                        model=self.model_id, tools=tuple(c.id for c in remaining), rejected=parsed.rejected
                    )
                )
            done: list[Candidate] = []
            share = len(remaining)
            for num, c in enumerate(remaining, 1):
                got, dropped = screen.split(parsed.requests.get(num, []), c)
                if dropped:
                    report.dropped += sum(dropped.values())
                    first = next(r for r in parsed.requests[num] if r not in got)
                    emit(
                        EnrichmentRequestsDropped(
                            model=self.model_id,
                            tool=c.id,
                            dropped=sum(dropped.values()),
                            reasons=tuple(sorted(dropped)),
                            sample=first[:200],
                        )
                    )
                if len(got) < MIN_USABLE:
                    continue
                s = GeneratedSet(
                    c.id,
                    content_hash(c),
                    self.model_id,
                    tuple(got),
                    usage[0] // share,
                    usage[1] // share,
                    usage is None or report.estimated_tokens,
                )
                await asyncio.to_thread(self.store.put, s)
                report.generated += 1
                report.examples += len(got)
                done.append(c)
            remaining = [c for c in remaining if c not in done]
            if not remaining:
                return
            error = (
                "the answer was not the JSON object asked for"
                if parsed.malformed
                else f"fewer than {MIN_USABLE} usable requests for " + ", ".join(c.id for c in remaining)
            )
        report.failed += len(remaining)
        for c in remaining:
            report.failures[c.id] = error[:300]
        emit(
            EnrichmentFailed(
                model=self.model_id, tools=tuple(c.id for c in remaining), attempts=attempts, error=error[:300]
            )
        )


def enrich_catalog(
    candidates: Sequence[Candidate],
    model: ChatModel | PromptModel | str,
    *,
    db: str | Path,
    examples: int = DEFAULT_EXAMPLES,
    force: bool = False,
    **options: Any,
) -> tuple[list[Candidate], EnrichmentReport]:
    """Enrich ``candidates`` with ``model`` into the feedback log ``db``; return them with their examples.

    The library's one call: tools already enriched by this model (same definition) cost
    nothing. The file is the feedback log that ``Shortlist(examples=db)``, ``shortlist select
    --examples``, ``shortlist serve --examples`` and the config's ``selection.examples`` read,
    so every deployment ranks with the generated requests. ``options`` go to
    :class:`CatalogEnricher` (``concurrency``, ``tools_per_request``, ``retries``, …).
    """
    with EnrichmentStore(db) as store:
        report = CatalogEnricher(model, store=store, examples=examples, **options).enrich(candidates, force=force)
        return store.feedback.enrich(candidates, kind="tool"), report
