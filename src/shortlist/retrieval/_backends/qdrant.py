"""``QdrantBackend``: the index in Qdrant (local mode for tests, a server or cluster in production).

One collection holds a point per chunk with a named dense vector (``dense``, cosine) and a
named sparse vector (``bm25``, IDF modifier). Qdrant's IDF modifier applies idf only, so the
sparse values are BM25 term weights computed here, ``tf / (tf + k1 (1 - b + b dl / avgdl))``,
with the same tokeniser and formula as the embedded backend; ``avgdl`` is the running average
recorded in a small companion collection (``<name>__meta``) when chunks are written. Queries
run both legs as ``Prefetch`` and fuse them with RRF at ``k=60``, set explicitly (the client's
local default is 2), so rankings agree with :class:`~shortlist.retrieval._backends.embedded.EmbeddedBackend`.
The companion collection also records the text analyser's signature (:mod:`shortlist._text`), checked
like the embedded index's manifest. A server that cannot be reached (refused, timed out, the
connection dropped) is an :class:`~shortlist.errors.OperationalError` with ``retry_after``, as a
PostgreSQL index's is: the service answers 503, not 500.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np

from shortlist._events import emit
from shortlist._text import analyser
from shortlist.embeddings._base import Embedder, Vectors
from shortlist.errors import ConfigError, MissingDependencyError, unavailable
from shortlist.retrieval._backends._embedded_files import analyser_problem as _analyser_problem
from shortlist.retrieval._backends.base import PREFETCH, RRF_K, Hit, IndexBackend, Progress, UpsertReport
from shortlist.retrieval._backends.embedded import IndexUnverified
from shortlist.retrieval._document import Chunk, Chunker, Document

try:
    from qdrant_client import QdrantClient, models
    from qdrant_client.http.exceptions import ResponseHandlingException
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from shortlist._install import pip_install

    raise MissingDependencyError(f"the Qdrant index backend needs qdrant-client: {pip_install('qdrant')}") from exc

__all__ = ["QdrantBackend"]

_NS = uuid.UUID("6f1f0a52-2d36-4d0e-9a53-3c1d7c2f61b1")
_META_ID = str(uuid.uuid5(_NS, "shortlist-meta"))
_BATCH = 256


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _reaching(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """``method``, with the server's transport failures (``ResponseHandlingException``: refused, timed
    out, dropped) raised as the index server being unavailable."""

    @functools.wraps(method)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except ResponseHandlingException as exc:
            raise unavailable("index server", exc) from exc

    return call


def _term_index(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little") & 0x7FFFFFFF


def _point_id(chunk_id: str) -> str:
    return str(uuid.uuid5(_NS, chunk_id))


class QdrantBackend(IndexBackend):
    """An index in a Qdrant collection, through ``qdrant-client``.

    Exactly one location: ``location=":memory:"`` (in-process, for tests), ``path=`` (local
    files, for tests and small data), or ``url=`` (with ``api_key=``) for a server or a cluster.

    Args:
        location: ``":memory:"`` or a server URL.
        path: a folder for local-mode persistence.
        url: a server URL such as ``https://xyz.cloud.qdrant.io:6333``.
        api_key: the server's API key.
        collection: the collection name.
        embedder: embeds chunks and queries (required: the collection has a dense vector).
        chunker: chunking settings.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.
        client: an existing ``QdrantClient`` to use instead (the other location args must be unset).
        client_options: extra keyword arguments for ``QdrantClient`` (timeouts, ``prefer_grpc``…).

    Raises:
        ConfigError: no embedder, several locations, or an embedder other than the collection's.
        OperationalError: the server cannot be reached (``retry_after`` is set; so for every method).
    """

    def __init__(
        self,
        location: str | None = None,
        *,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        collection: str = "shortlist",
        embedder: Embedder | None = None,
        chunker: Chunker | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        client: QdrantClient | None = None,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(embedder=embedder, chunker=chunker)
        if embedder is None:
            raise ConfigError("QdrantBackend needs an embedder (the collection holds dense vectors)")
        given = [x for x in (location, path, url, client) if x is not None]
        if len(given) > 1:
            raise ConfigError("give QdrantBackend one of location, path, url or client")
        self.client = client or QdrantClient(
            location=location if (location or path or url) else ":memory:",
            path=path,
            url=url,
            api_key=api_key,
            **dict(client_options or {}),
        )
        self._owns_client = client is None
        self.collection = collection
        self.meta_collection = f"{collection}__meta"
        self.k1, self.b = k1, b
        self._meta: dict[str, Any] = {}
        try:
            self._ensure_collections()
        except BaseException:
            self.close()  # a local path stays locked while its client is open
            raise

    # -- setup -----------------------------------------------------------------------------

    @_reaching
    def _ensure_collections(self) -> None:
        assert self.embedder is not None
        if self.client.collection_exists(self.meta_collection):
            found = self.client.retrieve(self.meta_collection, [_META_ID], with_payload=True)
            if found:
                self._meta = dict(found[0].payload or {})
        if self._meta:
            if self._meta.get("embedder") != self.embedder.model_name:
                raise ConfigError(
                    f"collection {self.collection!r} was built with embedder {self._meta.get('embedder')!r}, "
                    f"opened with {self.embedder.model_name!r}"
                )
            mismatch = _analyser_problem(self._meta, analyser("corpus"))
            if mismatch:
                raise ConfigError(f"collection {self.collection!r} {mismatch}")
            if self._meta.get("analyser") is None:
                emit(
                    IndexUnverified(
                        path=self.collection,
                        reason="built before the text analyser was recorded; its terms are assumed to be the "
                        "'corpus' preset's (recorded at the next write)",
                    )
                )
                self._meta["analyser"] = analyser("corpus").signature
            self.chunker = Chunker(**self._meta["chunking"])
            self.k1, self.b = float(self._meta["k1"]), float(self._meta["b"])
        if not self.client.collection_exists(self.collection):
            dim = int(self.embedder.embed(["dimension probe"]).shape[1])
            self.client.create_collection(
                self.collection,
                vectors_config={"dense": models.VectorParams(size=dim, distance=models.Distance.COSINE)},
                sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
            )
            if not self._is_local():  # local mode ignores payload indexes (and warns)
                kw, integer = models.PayloadSchemaType.KEYWORD, models.PayloadSchemaType.INTEGER
                self.client.create_payload_index(self.collection, "document_id", field_schema=kw)
                self.client.create_payload_index(self.collection, "position", field_schema=integer)
        if not self.client.collection_exists(self.meta_collection):
            self.client.create_collection(
                self.meta_collection, vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT)
            )
        if not self._meta:
            self._meta = {
                "embedder": self.embedder.model_name,
                "chunking": self.chunker.to_dict(),
                "k1": self.k1,
                "b": self.b,
                "analyser": analyser("corpus").signature,
                "chunks": 0,
                "tokens": 0,
            }
            self._write_meta()

    def _is_local(self) -> bool:
        return type(getattr(self.client, "_client", None)).__name__ == "QdrantLocal"

    def _write_meta(self) -> None:
        self.client.upsert(self.meta_collection, [models.PointStruct(id=_META_ID, vector=[1.0], payload=self._meta)])

    def close(self) -> None:
        """Close the client if this backend created it (releases a local path's lock)."""
        if self._owns_client:
            self.client.close()

    # -- contract ----------------------------------------------------------------------------

    def _sparse(self, tokens: list[str], avgdl: float) -> models.SparseVector:
        tf = Counter(tokens)
        dl = len(tokens)
        norm = self.k1 * (1 - self.b + self.b * dl / avgdl) if avgdl > 0 else self.k1
        indices = [_term_index(t) for t in tf]
        values = [c / (c + norm) for c in tf.values()]
        return models.SparseVector(indices=indices, values=values)

    @_reaching
    def upsert(self, documents: Sequence[Document], *, progress: Progress | None = None) -> UpsertReport:
        """See :meth:`IndexBackend.upsert`."""
        todo, added, updated, unchanged = self._plan(documents)
        if progress is not None and unchanged:
            progress(unchanged)
        if not todo:
            return UpsertReport(added=added, updated=updated, unchanged=unchanged)
        self._delete_points([d.id for d in todo])
        chunks, vectors = self._embed_chunks(todo, progress)
        assert vectors is not None
        tokens = [analyser("corpus").tokens(c.index_text) for c in chunks]
        self._meta["chunks"] = int(self._meta["chunks"]) + len(chunks)
        self._meta["tokens"] = int(self._meta["tokens"]) + sum(len(t) for t in tokens)
        avgdl = self._meta["tokens"] / max(1, self._meta["chunks"])
        for start in range(0, len(chunks), _BATCH):
            points = [
                models.PointStruct(
                    id=_point_id(c.id),
                    vector={"dense": vectors[i].tolist(), "bm25": self._sparse(tokens[i], avgdl)},
                    payload={**c.to_dict(), "length": len(tokens[i])},
                )
                for i, c in enumerate(chunks[start : start + _BATCH], start=start)
            ]
            self.client.upsert(self.collection, points)
        self._write_meta()
        return UpsertReport(added=added, updated=updated, unchanged=unchanged)

    def _delete_points(self, doc_ids: list[str]) -> None:
        for start in range(0, len(doc_ids), _BATCH):
            batch = doc_ids[start : start + _BATCH]
            flt = models.Filter(must=[models.FieldCondition(key="document_id", match=models.MatchAny(any=batch))])
            gone, tokens = 0, 0
            offset = None
            while True:
                points, offset = self.client.scroll(
                    self.collection, scroll_filter=flt, with_payload=["length"], limit=1000, offset=offset
                )
                gone += len(points)
                tokens += sum(int((p.payload or {}).get("length", 0)) for p in points)
                if offset is None:
                    break
            if gone:
                self.client.delete(self.collection, points_selector=models.FilterSelector(filter=flt))
                self._meta["chunks"] = max(0, int(self._meta["chunks"]) - gone)
                self._meta["tokens"] = max(0, int(self._meta["tokens"]) - tokens)

    @_reaching
    def delete(self, document_ids: Iterable[str]) -> int:
        """See :meth:`IndexBackend.delete`."""
        known = self.hashes()
        ids = [i for i in dict.fromkeys(document_ids) if i in known]
        if ids:
            self._delete_points(ids)
            self._write_meta()
        return len(ids)

    @_reaching
    def hashes(self) -> dict[str, str]:
        """See :meth:`IndexBackend.hashes`."""
        out: dict[str, str] = {}
        flt = models.Filter(must=[models.FieldCondition(key="position", match=models.MatchValue(value=0))])
        offset = None
        while True:
            points, offset = self.client.scroll(
                self.collection,
                scroll_filter=flt,
                with_payload=["document_id", "doc_hash"],
                limit=1000,
                offset=offset,
            )
            for p in points:
                payload = p.payload or {}
                out[str(payload["document_id"])] = str(payload.get("doc_hash", ""))
            if offset is None:
                return out

    @_reaching
    def count(self) -> int:
        """See :meth:`IndexBackend.count`."""
        flt = models.Filter(must=[models.FieldCondition(key="position", match=models.MatchValue(value=0))])
        return int(self.client.count(self.collection, count_filter=flt, exact=True).count)

    @staticmethod
    def _filter(filters: Mapping[str, Any] | None) -> models.Filter | None:
        if not filters:
            return None
        must: list[Any] = []
        for key, want in filters.items():
            if isinstance(want, list | tuple | set | frozenset):
                match: Any = models.MatchAny(any=list(want))
            else:
                match = models.MatchValue(value=want)
            must.append(models.FieldCondition(key=f"metadata.{key}", match=match))
        return models.Filter(must=must)

    @_reaching
    def query(
        self,
        text: str = "",
        *,
        vector: Vectors | None = None,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        use_embedder: bool = True,
    ) -> list[Hit]:
        """See :meth:`IndexBackend.query` (Prefetch of both legs, RRF with ``k=60``)."""
        if k <= 0:
            return []
        n = max(k, PREFETCH)
        flt = self._filter(filters)
        qterms = list(dict.fromkeys(analyser("corpus").tokens(text))) if text else []
        sparse = (
            models.SparseVector(indices=[_term_index(t) for t in qterms], values=[1.0] * len(qterms))
            if qterms
            else None
        )
        qv = self._query_vector(text, vector, use_embedder)
        lexical: dict[Any, float] = {}
        if sparse is not None:
            lex = self.client.query_points(
                self.collection, query=sparse, using="bm25", limit=n, query_filter=flt, with_payload=False
            ).points
            lexical = {p.id: float(p.score) for p in lex if p.score > 0}
        if sparse is not None and qv is not None:
            res = self.client.query_points(
                self.collection,
                prefetch=[
                    models.Prefetch(query=sparse, using="bm25", limit=n, filter=flt),
                    models.Prefetch(query=qv.tolist(), using="dense", limit=n, filter=flt),
                ],
                query=models.RrfQuery(rrf=models.Rrf(k=RRF_K)),
                limit=k,
                with_payload=True,
                with_vectors=["dense"],
            ).points
        elif qv is not None:
            res = self.client.query_points(
                self.collection,
                query=qv.tolist(),
                using="dense",
                limit=k,
                query_filter=flt,
                with_payload=True,
                with_vectors=["dense"],
            ).points
        elif sparse is not None:
            res = self.client.query_points(
                self.collection, query=sparse, using="bm25", limit=k, query_filter=flt, with_payload=True
            ).points
            res = [p for p in res if p.score > 0]
        else:
            return []
        hits = []
        for p in res:
            dense = None
            if qv is not None and isinstance(p.vector, dict) and "dense" in p.vector:
                dense = float(np.dot(np.asarray(p.vector["dense"], dtype=np.float32), qv))
            hits.append(
                Hit(Chunk.from_dict(p.payload or {}), score=float(p.score), dense=dense, lexical=lexical.get(p.id, 0.0))
            )
        return hits
