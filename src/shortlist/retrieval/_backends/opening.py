"""Open an index built by ``shortlist index build``: an embedded folder, a Qdrant collection or a PostgreSQL corpus.

The folder holds either the embedded backend's files (its ``manifest.json`` names the
embedder) or a ``shortlist-index.json`` description (backend, embedder, and for Qdrant
the collection and the server URL), so a CLI query, a library user and every replica of
the HTTP service open the same index the same way. A ``postgresql://…[?corpus=NAME]`` URL in place
of the folder opens a corpus of the PostgreSQL + pgvector backend; the database records its embedder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shortlist.embeddings._base import Embedder
from shortlist.errors import CatalogError, ConfigError
from shortlist.retrieval._backends.base import IndexBackend
from shortlist.retrieval._document import Chunker

__all__ = ["INDEX_DESCRIPTION", "embedder_by_name", "is_postgres_url", "open_index"]

#: The file describing a non-embedded index (or how it was built).
INDEX_DESCRIPTION = "shortlist-index.json"


def embedder_by_name(name: str) -> Embedder:
    """The embedder an index was built with: ``default`` (the offline MiniLM) or ``hashing[-DIM]``.

    Raises:
        ConfigError: an unknown name.
    """
    from shortlist.embeddings._default import DEFAULT_MODEL_NAME, default_embedder
    from shortlist.embeddings._hashing import HashingEmbedder

    if name in ("default", DEFAULT_MODEL_NAME):
        return default_embedder()
    if name == "hashing":
        return HashingEmbedder()
    if name.startswith("hashing-") and name[8:].isdigit():
        return HashingEmbedder(int(name[8:]))
    raise ConfigError(f"unknown embedder {name!r}: use 'default' or 'hashing'")


def is_postgres_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a PostgreSQL database (``postgresql://`` or ``postgres://``) rather than a folder."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def _open_postgres(
    url: str,
    *,
    embedder_name: str | None,
    collection: str | None,
    chunker: Chunker | None,
    hnsw: Mapping[str, Any] | None = None,
) -> IndexBackend:
    from shortlist.retrieval._backends.postgres import PostgresBackend, split_corpus_url

    dsn, corpus = split_corpus_url(url, default=collection or "shortlist")
    recorded = PostgresBackend.describe(dsn, corpus)
    if embedder_name is None and recorded is None:
        raise ConfigError(f"no corpus {corpus!r} in that database (build one with 'shortlist index build')")
    if hnsw and recorded is not None:
        raise ConfigError(
            f"corpus {corpus!r} exists and keeps its graph: change it with 'shortlist index rebuild-hnsw'"
        )
    name = embedder_name or str((recorded or {}).get("embedder") or "default")
    emb = embedder_by_name(name)
    graph = {f"hnsw_{k}": v for k, v in (hnsw or {}).items()}
    # the URL, not the bare DSN: the backend reads its other parameters (ef_search=) from it
    return PostgresBackend(url, corpus=corpus, embedder=emb, chunker=chunker, **graph)


def describe_index(path: Path) -> dict[str, Any]:
    """Read what ``path`` says about its index ({} when there is none).

    Raises:
        CatalogError: the description is unreadable.
    """
    try:
        sidecar = path / INDEX_DESCRIPTION
        if sidecar.is_file():
            return dict(json.loads(sidecar.read_text(encoding="utf-8")))
        if (path / "manifest.json").is_file():
            manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
            return {"backend": "embedded", "embedder": manifest["embedder"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CatalogError(f"{path}: unreadable index description: {exc}") from exc
    return {}


def open_index(
    path: str | os.PathLike[str],
    *,
    backend: str | None = None,
    embedder_name: str | None = None,
    url: str | None = None,
    api_key_env: str = "QDRANT_API_KEY",
    collection: str = "shortlist",
    chunker: Chunker | None = None,
    hnsw: Mapping[str, Any] | None = None,
) -> IndexBackend:
    """Open the index at ``path``, from its description when it has one, else as the arguments say.

    Args:
        path: the index folder, or a ``postgresql://`` URL (its ``corpus=`` parameter, else ``collection``,
            names the corpus; ``ef_search=N`` sets how widely queries walk the HNSW graph).
        backend: ``embedded``, ``qdrant`` or ``postgres`` (None: what the folder says).
        embedder_name: the embedder (None: the one the index was built with).
        url: a Qdrant server URL (instead of local files under ``path``), or the PostgreSQL URL of
            ``backend="postgres"``.
        api_key_env: the environment variable holding the Qdrant API key.
        collection: the Qdrant collection (or the PostgreSQL corpus).
        chunker: chunking for documents upserted later.
        hnsw: the HNSW graph of a new postgres corpus (``m``, ``ef_construction``, ``storage``,
            ``shards``; an existing corpus is refused: ``PostgresBackend.rebuild_hnsw`` changes it).

    Raises:
        ConfigError: no index and no backend named, a backend or embedder mismatch.
        CatalogError: an unreadable description.
    """
    if is_postgres_url(path) or (backend == "postgres" and url):
        if backend not in (None, "postgres"):
            raise ConfigError(f"a PostgreSQL URL holds a postgres index, not {backend}")
        target = str(path) if is_postgres_url(path) else str(url)
        return _open_postgres(target, embedder_name=embedder_name, collection=collection, chunker=chunker, hnsw=hnsw)
    if backend == "postgres":
        raise ConfigError("the postgres backend needs a postgresql:// URL (--url)")
    if hnsw:
        raise ConfigError("HNSW graph options are for a postgres corpus")
    folder = Path(path)
    info = describe_index(folder)
    if backend is None and not info:
        raise ConfigError(f"{folder}: no shortlist index here (build one with 'shortlist index build')")
    kind = info.get("backend") or backend
    if backend is not None and info and kind != backend:
        raise ConfigError(f"{folder} holds a {kind} index, not {backend}")
    emb = embedder_by_name(str(embedder_name or info.get("embedder") or "default"))
    if embedder_name is not None and info.get("embedder") and emb.model_name != info["embedder"]:
        raise ConfigError(f"{folder} was built with embedder {info['embedder']!r}; rebuild it to change embedder")
    if kind == "embedded":
        from shortlist.retrieval._backends.embedded import EmbeddedBackend

        return EmbeddedBackend(folder, embedder=emb, chunker=chunker)
    from shortlist.retrieval._backends.qdrant import QdrantBackend

    server = info.get("url") or url
    key_env = info.get("api_key_env") or api_key_env
    name = info.get("collection") or collection
    if server:
        return QdrantBackend(
            url=server, api_key=os.environ.get(key_env), collection=name, embedder=emb, chunker=chunker
        )
    return QdrantBackend(path=str(folder), collection=name, embedder=emb, chunker=chunker)
