"""A client for any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM, TEI, …).

POSTs ``{"model": ..., "input": [texts]}`` in batches of ``batch_size`` and reads
``data[*].embedding`` (ordered by ``data[*].index``). 429, 5xx and connection errors are
retried with exponential backoff (honouring ``Retry-After``); every failure ends as an
:class:`~shortlist.errors.EmbeddingError`. The API key is read from an environment
variable named in the configuration, never from the configuration itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
import numpy as np

from shortlist._events import Event, emit
from shortlist._model_guard import check_model_request
from shortlist.embeddings._base import Embedder, Vectors, unit_rows
from shortlist.errors import EmbeddingError, UsageError

__all__ = ["EmbeddingRetry", "OpenAIEmbedder"]

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, kw_only=True)
class EmbeddingRetry(Event):
    """An embedding request failed transiently and is retried after ``delay_s``."""

    name: ClassVar[str] = "embeddings.retry"
    area: ClassVar[str] = "embeddings"
    level: int = logging.WARNING
    model: str = ""
    attempt: int = 0
    delay_s: float = 0.0
    error: str = ""


class _Retry(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIEmbedder(Embedder):
    """Embeddings from an OpenAI-compatible HTTP endpoint.

    Args:
        model: the model name sent with each request.
        base_url: the API root (``…/v1``); ``/embeddings`` is appended unless already there.
        api_key: the key itself (prefer ``api_key_env``).
        api_key_env: name of the environment variable holding the key (read on each
            request; no key sends no ``Authorization`` header, as local servers expect).
        timeout_s: per-request timeout in seconds.
        batch_size: texts per request.
        max_retries: retries after the first attempt on 429/5xx/connection errors.
        backoff_s: first retry delay; doubles each retry (with jitter), capped at 20 s.
        dimensions: ask the endpoint for vectors of this size (``dimensions`` field).
        headers: extra HTTP headers.
        transport: an httpx transport (tests, proxies).
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        batch_size: int = 64,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        dimensions: int | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not model:
            raise UsageError("an OpenAI-compatible embedder needs a model name")
        if not base_url.startswith(("http://", "https://")):
            raise UsageError(f"base_url must be an http(s) URL, got {base_url!r}")
        if batch_size < 1 or max_retries < 0 or timeout_s <= 0:
            raise UsageError("batch_size must be >= 1, max_retries >= 0 and timeout_s > 0")
        self.model = model
        self.model_name = f"openai:{model}"
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/embeddings") else base + "/embeddings"
        self._api_key = api_key
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.dimensions = dimensions
        self._headers = dict(headers or {})
        self._transport = transport
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        #: The key of this endpoint's vectors in the persistent cache: the URL, model and dimensions.
        self.model_identity = f"{self.url}|{model}|{dimensions or ''}"

    # -- request building -------------------------------------------------------------------

    def _request_headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self._headers}
        key = self._api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _body(self, texts: Sequence[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        return body

    def _parse(self, response: httpx.Response, count: int) -> Vectors:
        if response.status_code in _RETRY_STATUS:
            retry_after = _retry_after(response)
            raise _Retry(f"HTTP {response.status_code}: {response.text[:200]}", retry_after)
        if response.status_code >= 400:
            raise EmbeddingError(
                f"{self.model_name}: {self.url} answered HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda d: int(d.get("index", 0)))
            out = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        except Exception as exc:
            raise EmbeddingError(f"{self.model_name}: unexpected response from {self.url}: {exc}") from exc
        if out.ndim != 2 or out.shape[0] != count:
            raise EmbeddingError(f"{self.model_name}: asked for {count} vectors, got shape {out.shape}")
        return out

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return float(min(max(retry_after, 0.0), 20.0))
        return float(min(self.backoff_s * (2**attempt) * (0.5 + random.random() / 2), 20.0))

    def _failed(self, exc: BaseException) -> EmbeddingError:
        return EmbeddingError(f"{self.model_name}: {self.url} failed after {self.max_retries + 1} attempts: {exc}")

    # -- sync -------------------------------------------------------------------------------

    def _http(self) -> httpx.Client:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = httpx.Client(timeout=self.timeout_s, transport=self._transport)
        return self._client

    def _post(self, texts: Sequence[str]) -> Vectors:
        check_model_request(self.url, who=self.model_name, test_double=isinstance(self._transport, httpx.MockTransport))
        last: BaseException | None = None
        for attempt in range(self.max_retries + 1):
            retry_after: float | None = None
            try:
                response = self._http().post(self.url, json=self._body(texts), headers=self._request_headers())
                return self._parse(response, len(texts))
            except _Retry as exc:
                last, retry_after = exc, exc.retry_after
            except httpx.TransportError as exc:  # connection refused/reset, timeouts
                last = exc
            if attempt < self.max_retries:
                delay = self._delay(attempt, retry_after)
                emit(EmbeddingRetry(model=self.model, attempt=attempt + 1, delay_s=delay, error=str(last)))
                time.sleep(delay)
        raise self._failed(last or RuntimeError("no attempt made"))

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in requests of ``batch_size``.

        Raises:
            EmbeddingError: an HTTP error, a malformed answer, or retries exhausted.
        """
        parts = [self._post(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return np.vstack(parts) if parts else np.zeros((0, 0), dtype=np.float32)

    # -- async ------------------------------------------------------------------------------

    async def _apost(self, client: httpx.AsyncClient, texts: Sequence[str]) -> Vectors:
        check_model_request(self.url, who=self.model_name)
        last: BaseException | None = None
        for attempt in range(self.max_retries + 1):
            retry_after: float | None = None
            try:
                response = await client.post(self.url, json=self._body(texts), headers=self._request_headers())
                return self._parse(response, len(texts))
            except _Retry as exc:
                last, retry_after = exc, exc.retry_after
            except httpx.TransportError as exc:
                last = exc
            if attempt < self.max_retries:
                delay = self._delay(attempt, retry_after)
                emit(EmbeddingRetry(model=self.model, attempt=attempt + 1, delay_s=delay, error=str(last)))
                await asyncio.sleep(delay)
        raise self._failed(last or RuntimeError("no attempt made"))

    async def aembed(self, texts: Sequence[str]) -> Vectors:
        """Async twin of :meth:`embed` over ``httpx.AsyncClient`` (normalised rows).

        Raises:
            EmbeddingError: an HTTP error, a malformed answer, or retries exhausted.
        """
        if len(texts) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        texts = list(texts)
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            parts = [
                await self._apost(client, texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)
            ]
        out = np.vstack(parts)
        return np.asarray(unit_rows(out), dtype=np.float32)

    def close(self) -> None:
        """Close the pooled HTTP connection (idempotent)."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
