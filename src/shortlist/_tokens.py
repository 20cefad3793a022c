"""Counting tokens, the one home for it: every surface (evaluation, runtime, service, integrations,
telemetry, grounding, reduction) counts here, so the same tools measure the same everywhere.

* :func:`count_tokens` / :func:`default_counter`: what every report counts with, offline tiktoken
  ``o200k_base`` (else the estimate below, named ``chars/4``).
* :func:`estimate_tokens`: the one estimate from characters (``ceil(chars / 4)``), for cheap
  decisions (a policy's prefix and carrying costs) and where no text is at hand.
* :func:`definition_text` / :func:`tool_tokens`: the text a tool definition is counted as
  (JSON of name, description and parameters) and the tokens of a set of tools, the public,
  offline way to ask "what do these tools cost in a request?".
* :func:`counter_for_model`: the counter for a model name (reduction budgets).

The BPE files of ``cl100k_base`` and ``o200k_base`` come from the ``bpe-openai`` wheel (located with
``importlib.util.find_spec``; the package is never imported). Their gunzipped sha256 is checked
against the hash tiktoken itself expects, and the encoding is built with the exact constructor
parameters of ``tiktoken_ext.openai_public``, whose BPE loader is intercepted so that tiktoken
never touches the network or its download cache. Characters are always counted besides tokens.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.util
import json
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from shortlist.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from shortlist._types import Candidate

__all__ = [
    "CHARS_PER_TOKEN",
    "CachedCounter",
    "HeuristicCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_tokens",
    "counter_for_model",
    "default_counter",
    "definition_text",
    "definition_tokens",
    "estimate_tokens",
    "register_model_counter",
    "tool_text",
    "tool_tokens",
]

#: Characters per token of the one character-based estimate (English prose and JSON).
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str | int) -> int:
    """The estimate from characters: ``ceil(chars / 4)`` of a text, or of a character count."""
    chars = text if isinstance(text, int) else len(text)
    return -(-chars // CHARS_PER_TOKEN)


_OFFLINE_ENCODINGS = ("cl100k_base", "o200k_base")


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of a text. ``name`` is reported in diagnostics."""

    @property
    def name(self) -> str:
        """A short name for diagnostics, e.g. ``tiktoken:o200k_base``."""
        ...

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text``."""
        ...


class HeuristicCounter:
    """Approximate counter: ``ceil(chars / chars_per_token)``. Fast, dependency-free, not exact.

    Args:
        chars_per_token: Average characters per token (4.0 suits English prose).
    """

    def __init__(self, chars_per_token: float = CHARS_PER_TOKEN) -> None:
        if not chars_per_token > 0:
            raise ConfigError("chars_per_token must be positive")
        self._cpt = float(chars_per_token)

    @property
    def name(self) -> str:
        """``chars/<n>``."""
        return f"chars/{self._cpt:g}"

    def count(self, text: str) -> int:
        """Return ``ceil(len(text) / chars_per_token)``."""
        if self._cpt == CHARS_PER_TOKEN:
            return estimate_tokens(text)
        return math.ceil(len(text) / self._cpt)


def _bpe_path(encoding: str) -> Path:
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "offline token counting needs the 'bpe-openai' package (pip install bpe-openai==0.1.4)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{encoding}.tiktoken.gz"
    if not path.is_file():
        raise MissingDependencyError(f"bpe-openai does not ship {path.name}; reinstall bpe-openai==0.1.4")
    return path


def _read_ranks(encoding: str, expected_hash: str | None) -> dict[bytes, int]:
    data = gzip.decompress(_bpe_path(encoding).read_bytes())
    actual = hashlib.sha256(data).hexdigest()
    if expected_hash is not None and actual != expected_hash:
        raise MissingDependencyError(
            f"{encoding}: BPE file from bpe-openai has sha256 {actual}, tiktoken expects {expected_hash}"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


_build_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    """Build the tiktoken ``Encoding`` offline (cached per process)."""
    if name not in _OFFLINE_ENCODINGS:
        raise ConfigError(f"unknown offline encoding {name!r}; expected one of {list(_OFFLINE_ENCODINGS)}")
    try:
        import tiktoken
        import tiktoken_ext.openai_public as public
    except ImportError as exc:  # pragma: no cover - core dependency
        raise MissingDependencyError("offline token counting needs 'tiktoken' (pip install tiktoken)") from exc
    constructor: Callable[[], dict[str, Any]] = getattr(public, name)
    expected: list[str | None] = []

    def offline_loader(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if not url.endswith(f"/{name}.tiktoken"):
            raise ConfigError(f"unexpected BPE request {url!r} while building {name} offline")
        expected.append(expected_hash)
        return _read_ranks(name, expected_hash)

    # Borrow the constructor parameters (pat_str, special tokens, expected hash) of
    # tiktoken_ext.openai_public while serving the ranks from the local file.
    with _build_lock:
        original = public.load_tiktoken_bpe
        public.load_tiktoken_bpe = offline_loader
        try:
            params = constructor()
        finally:
            public.load_tiktoken_bpe = original
    if not expected or expected[0] is None:
        raise MissingDependencyError(f"tiktoken gave no expected hash for {name}; cannot verify the BPE file")
    return tiktoken.Encoding(**params)


class TiktokenCounter:
    """Exact counter for OpenAI encodings, built offline from the ``bpe-openai`` BPE files.

    Args:
        encoding: ``"o200k_base"`` (GPT-4o and later) or ``"cl100k_base"`` (GPT-4, GPT-3.5).

    Raises:
        ConfigError: for another encoding name.
        MissingDependencyError: (on first use) when the BPE file is missing or its hash does not match.
    """

    def __init__(self, encoding: str = "o200k_base") -> None:
        if encoding not in _OFFLINE_ENCODINGS:
            raise ConfigError(f"unknown offline encoding {encoding!r}; expected one of {list(_OFFLINE_ENCODINGS)}")
        self._name = encoding
        self._enc: Any = None  # built on first use (about 0.5 s), shared by every counter

    def load(self) -> TiktokenCounter:
        """Build the encoding now instead of on the first count; returns ``self``."""
        if self._enc is None:
            self._enc = _encoding(self._name)
        return self

    def encoding(self) -> Any:
        """The tiktoken ``Encoding`` itself (built offline on first use), for token ids."""
        return self.load()._enc

    @property
    def name(self) -> str:
        """``tiktoken:<encoding>``."""
        return f"tiktoken:{self._name}"

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text`` (special-token text is counted as ordinary text)."""
        enc = self._enc if self._enc is not None else self.load()._enc
        return len(enc.encode_ordinary(text))


class CachedCounter:
    """Wraps a counter with a bounded per-text cache, so each fragment is tokenised once.

    Args:
        inner: The counter to cache.
        max_entries: Cache size; the cache is cleared when it is full.
    """

    def __init__(self, inner: TokenCounter, max_entries: int = 200_000) -> None:
        self.inner = inner
        self._max = max_entries
        self._cache: dict[str, int] = {}
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        """The wrapped counter's name."""
        return self.inner.name

    def count(self, text: str) -> int:
        """Return the (cached) token count of ``text``."""
        cached = self._cache.get(text)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        value = self.inner.count(text)
        if len(self._cache) >= self._max:
            self._cache.clear()
        self._cache[text] = value
        return value

    def clear(self) -> None:
        """Forget every cached count."""
        self._cache.clear()


_MODEL_COUNTERS: list[tuple[str, Callable[[], TokenCounter]]] = []
_model_lock = threading.Lock()


def register_model_counter(prefix: str, factory: Callable[[], TokenCounter]) -> None:
    """Use ``factory()`` for every model whose name starts with ``prefix`` (latest registration wins).

    Args:
        prefix: Model-name prefix, compared case-insensitively (e.g. ``"claude-"``).
        factory: Builds the counter; called on each :func:`counter_for_model` lookup.
    """
    if not prefix:
        raise ConfigError("a model-counter prefix must be non-empty")
    with _model_lock:
        _MODEL_COUNTERS.insert(0, (prefix.lower(), factory))


_CL100K_PREFIXES = ("gpt-4-", "gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")


def counter_for_model(model: str | None = None) -> TokenCounter:
    """Return the token counter for a model name, wrapped in a :class:`CachedCounter`.

    Registered prefixes win; then ``gpt-4o``, ``gpt-4.1``, ``gpt-5``, ``o1``/``o3``/``o4`` and any
    unknown or absent model use ``o200k_base``; ``gpt-4``, ``gpt-3.5`` and ``text-embedding-*``
    use ``cl100k_base``. Other vendors' models are approximated with ``o200k_base`` unless a
    counter is registered for them.

    Args:
        model: A model name, or ``None`` for the default.

    Returns:
        A cached counter.
    """
    name = (model or "").lower()
    with _model_lock:
        registered = list(_MODEL_COUNTERS)
    for prefix, factory in registered:
        if name.startswith(prefix):
            return CachedCounter(factory())
    modern = ("gpt-4o", "gpt-4.1", "gpt-4.5", "chatgpt-4o")
    if name.startswith(_CL100K_PREFIXES) and not name.startswith(modern):
        return CachedCounter(TiktokenCounter("cl100k_base"))
    return CachedCounter(TiktokenCounter("o200k_base"))


_default: TokenCounter | None = None
_default_lock = threading.Lock()


def default_counter() -> TokenCounter:
    """The counter every report uses: offline tiktoken ``o200k_base`` (cached per text), built once
    per process; :class:`HeuristicCounter` (``chars/4``) when the BPE file cannot be had."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                try:
                    _default = CachedCounter(TiktokenCounter("o200k_base").load())
                except Exception:  # no offline BPE file: the documented estimate, named in every report
                    _default = HeuristicCounter()
    return _default


def count_tokens(text: str) -> int:
    """Tokens of ``text`` with :func:`default_counter`."""
    return default_counter().count(text)


def tool_text(name: str, description: str, parameters: Mapping[str, Any] | None = None) -> str:
    """The text one tool definition is counted as: JSON of its name, description and parameters."""
    body: dict[str, Any] = {"name": name, "description": description}
    if parameters:
        body["parameters"] = dict(parameters)
    return json.dumps(body, ensure_ascii=False, sort_keys=True, default=str)


def definition_text(c: Candidate) -> str:
    """The tool definition a model would receive for ``c`` (:func:`tool_text` of its fields)."""
    return tool_text(c.name, c.description, c.parameters)


def definition_tokens(c: Candidate) -> int:
    """The :func:`estimate_tokens` of ``c``'s definition: what the offer policies' cost rules weigh."""
    return estimate_tokens(definition_text(c))


def tool_tokens(tools: Iterable[Candidate], counter: TokenCounter | None = None) -> int:
    """Tokens of these tools' definitions in a request, counted (not estimated); offline.

    Every surface that reports tool tokens (the evaluation, the runtime's turn report, the
    service's decisions, telemetry, the framework integrations) reports this figure.
    """
    count = (counter or default_counter()).count
    return sum(count(definition_text(c)) for c in tools)
