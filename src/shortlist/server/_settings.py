"""``ServerSettings``: everything ``shortlist serve`` needs, from arguments, a keys file and the environment.

Settings are a frozen pydantic model so that they travel to every worker process as one JSON
document (``SHORTLIST_SERVER_SETTINGS``); :meth:`ServerSettings.from_env` rebuilds them there.

API keys come from ``SHORTLIST_API_KEYS`` (comma-separated, unrestricted) and from a keys file,
one key per line, optionally followed by the memory scopes it may touch::

    # KEY  [SCOPE ...]      a SCOPE is k=v[,k=v...]; the key may use any scope that contains it
    k-admin
    k-alice user_id=alice
    k-team  workspace_id=w1,team=red  user_id=bob

A key with no scope is unrestricted. Keys are kept as SHA-256 digests only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shortlist.errors import ConfigError

__all__ = ["ENV_API_KEYS", "ENV_INSTANCE", "ENV_SETTINGS", "KeyPolicy", "ServerSettings", "hash_key", "parse_keys_file"]

#: Environment variable with comma-separated API keys.
ENV_API_KEYS = "SHORTLIST_API_KEYS"
#: Environment variable carrying the serialised settings to worker processes.
ENV_SETTINGS = "SHORTLIST_SERVER_SETTINGS"
#: The id of one ``shortlist serve`` (its workers share it), which ``/readyz`` names, so the
#: command's readiness check tells its own server from another on the same port.
ENV_INSTANCE = "SHORTLIST_INSTANCE_ID"


def hash_key(key: str) -> str:
    """The SHA-256 hex digest under which a key is stored and looked up."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyPolicy(BaseModel):
    """What one API key may do.

    Attributes:
        label: a non-secret name for logs (the first 4 characters of the digest by default).
        scopes: memory scopes the key may touch; a request scope is allowed when it contains
            every pair of one of them. ``None``: any scope.
    """

    model_config = ConfigDict(frozen=True)

    label: str
    scopes: tuple[dict[str, str], ...] | None = None

    def allows(self, scope: Mapping[str, str]) -> bool:
        """True when this key may read or write memories of ``scope``."""
        if self.scopes is None:
            return True
        return any(all(scope.get(k) == v for k, v in allowed.items()) for allowed in self.scopes)


def _parse_scope(text: str, where: str) -> dict[str, str]:
    scope: dict[str, str] = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"bad scope {text!r}; write k=v[,k=v...]", source=where)
        scope[key.strip()] = value.strip()
    return scope


def parse_keys_file(path: str | os.PathLike[str]) -> dict[str, KeyPolicy]:
    """Read a keys file (see the module docs) into ``{sha256(key): KeyPolicy}``.

    Raises:
        ConfigError: the file cannot be read or a line is malformed.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read API keys file: {exc.strerror or exc}", source=str(path)) from None
    keys: dict[str, KeyPolicy] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split("#", 1)[0].split()
        if not parts:
            continue
        where = f"{path}:{lineno}"
        digest = hash_key(parts[0])
        scopes = tuple(_parse_scope(p, where) for p in parts[1:]) or None
        keys[digest] = KeyPolicy(label=f"key-{digest[:8]}", scopes=scopes)
    return keys


class ServerSettings(BaseModel):
    """Settings of one service (shared by all its workers).

    Attributes:
        config_path: the ``runtime.yaml`` (None: built-in defaults).
        catalogs: catalogs loaded at start-up, name -> catalog file.
        selector: the selector ``/v1/select`` uses (None: the config's binding, else the default).
        api_keys: ``{sha256(key): KeyPolicy}``; empty means loopback clients only.
        memory_url: ``memory:`` (in-process), ``sqlite:///PATH`` or ``postgresql://...``.
        max_body_bytes: largest request body accepted (413 above).
        max_candidates: most inline candidates in one selection request (413 above).
        max_texts: most texts in one embeddings or rerank request (413 above).
        request_timeout_s: a request still running after this answers 504.
        embed_model: the served embedding model's name on the compatibility routes (docs/compat.md);
            a request naming another model is answered 404.
        corpus_path: documents for ``/v1/retrieve`` (a folder of ``.md``/``.txt`` or a JSONL file),
            indexed in memory at start-up (None: no corpus, the route answers 404).
        corpus_index: an index built by ``shortlist index build`` (an embedded folder, or a
            folder describing a Qdrant collection on a server): what replicas share.
        corpus_scoring: ``hybrid``, ``lexical`` or ``overlap`` (see ``CorpusRetriever``).
        breaker_threshold: consecutive failures of an external selector that open its circuit
            breaker (0 disables the breaker).
        breaker_cooldown_s: seconds an open breaker refuses calls before a background probe.
        selection_threads: threads per worker that run selectors and embeddings (the event loop's
            default executor). More than Python's default (CPUs + 4) lets concurrent queries share
            a model run (see :class:`~shortlist.embeddings._batching.Coalescer`).
        examples_path: a feedback log whose logged queries become the candidates' usage examples
            (None: the config's ``selection.examples``, if any).
        health_port: the port of the health listener, which serves only ``/healthz`` and
            ``/readyz`` (None: none; probes use the service port).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    config_path: str | None = None
    catalogs: dict[str, str] = Field(default_factory=dict)
    selector: str | None = None
    api_keys: dict[str, KeyPolicy] = Field(default_factory=dict)
    memory_url: str = "memory:"
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    max_candidates: int = Field(default=5000, ge=1)
    max_texts: int = Field(default=2048, ge=1)
    request_timeout_s: float = Field(default=30.0, gt=0)
    embed_model: str = "all-MiniLM-L6-v2"
    corpus_path: str | None = None
    corpus_index: str | None = None
    corpus_scoring: Literal["hybrid", "lexical", "overlap"] = "hybrid"
    breaker_threshold: int = Field(default=3, ge=0)
    breaker_cooldown_s: float = Field(default=5.0, gt=0)
    selection_threads: int = Field(default=32, ge=1, le=1024)
    examples_path: str | None = None
    health_port: int | None = Field(default=None, ge=1, le=65535)

    @classmethod
    def build(
        cls,
        *,
        env: Mapping[str, str] | None = None,
        api_keys_file: str | None = None,
        **fields: Any,
    ) -> ServerSettings:
        """Build settings from fields plus the keys of ``SHORTLIST_API_KEYS`` and ``api_keys_file``.

        Raises:
            ConfigError: a keys file cannot be read or parsed.
        """
        env = os.environ if env is None else env
        keys: dict[str, KeyPolicy] = dict(fields.pop("api_keys", {}) or {})
        for raw in env.get(ENV_API_KEYS, "").split(","):
            if raw.strip():
                digest = hash_key(raw.strip())
                keys[digest] = KeyPolicy(label=f"key-{digest[:8]}")
        if api_keys_file:
            keys.update(parse_keys_file(api_keys_file))
        return cls(api_keys=keys, **fields)

    def to_env(self) -> str:
        """Serialise for :data:`ENV_SETTINGS` (keys are digests, never the keys themselves)."""
        return self.model_dump_json()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerSettings:
        """Rebuild the settings a parent process put in :data:`ENV_SETTINGS` (else defaults + env keys)."""
        env = os.environ if env is None else env
        raw = env.get(ENV_SETTINGS)
        if raw:
            return cls.model_validate_json(raw)
        return cls.build(env=env)
