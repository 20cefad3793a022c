"""The hybrid ranker: BM25 and embedding scores fused, multi-request queries split, abstention on a confidence.

The fusions (``"score"`` by default, ``"zscore"``, ``"rrf"``) are :mod:`shortlist.rankers._fusion`'s;
the scale levers' view of a catalog is :mod:`shortlist.rankers._structure`'s. With a ``query_prefix``
(off by default) the description cosine embeds
the query behind it; the usage-example cosine (query against past queries) and the confidence
use the query as written, embedded in the same model call. Two are measured:
:data:`USER_QUERY_PREFIX` ("The user wants: ") states what a message is without naming tools and
suits one-line requests and conversational turns alike; :data:`TOOL_QUERY_PREFIX` ("Which tool
can help with this request: ") lifts one-line requests but costs a conversation.

Defaults are judged by the conversation cost model first (``docs/evaluation.md``). The default
splits a query at explicit joints only, with score fusion and no prefix: on the BFCL conversation
set it completes as many turns as no split under ``stable`` and ``deferred`` (one more under
``per_turn``) for 0.2% less money. ``query_prefix=USER_QUERY_PREFIX`` is cheaper still there
(``per_turn`` 0.724 -> 0.751 complete turns, 1.4-1.8% less money) and lifts MetaTool and
LiveMCPBench, but ranks ``book_hotel`` above ``search_flights`` for "book a flight to Rome" in the
bundled example catalog, so it is an option for now. z-score fusion and the tool prefix cost
complete turns there (deferred 0.960 -> 0.952 with both and a sentence split): options too.

With ``decompose``, a request that asks for several things ("book a flight and also find a hotel") is split into
its intents (:func:`~shortlist.selection._query.split_intents`; by default only at explicit
joints such as "and also" or ", then": sentence ends cut too with ``"sentences"``, which on a
conversational turn split off context as often as requests); every part is embedded in the
same model call as the whole, each candidate scores the best of the whole and of the parts
(a part's score less ``decompose_penalty``), so each intent's best tool competes on its own
part's evidence. With ``cover_intents`` the top ``k`` also takes the best candidate of each
part right after the overall best, before filling by score; measured, the max over parts
already brings those up (MetaTool zero-shot Recall@5 0.792 either way, nDCG@10 0.724 without
the cover vs 0.721 with it), so it is off by default. Measured in ``docs/evaluation.md``.

Large catalogs add levers on the fused scores (:mod:`shortlist.rankers._scale`, measured in
``docs/evaluation.md``, "Ranking at scale"). On by default: ``name_match`` (a tool the message names,
``get_weather``/``getWeather``/``Get-Weather``, or cued spaced words and one-word names, ranks first)
and server evidence (``server_weight`` 0.5, ``server_top`` 3: each tool gains half the mean of its
server's three best fused scores, so the tools of the servers a request is about rise together; a
catalog without servers, suites or name prefixes ranks exactly as without it) and ``dedupe``
(same-named variants of one tool, ``read_file`` of two MCP servers, take one slot). Options:
``dedupe_descriptions`` (tools with the same description are variants too), ``name_vector`` (a
tool's cosine is at least a share of its name's alone) and ``server_centroid`` (the query's cosine to
a server's mean tool).

A candidate list that is most of a catalog the ranker has indexed, in its order (a ``find_tools``
search ranks the catalog less what the model can call), is scored among that catalog with the rest
masked out before anything compares candidates: no index is built for it (a search took 786 ms at
10,000 tools, 18.5 now: ``bench/bench_search.py``) and it ranks as the list alone would, but for
BM25's term weights, which stay the catalog's (:meth:`~shortlist.rankers._recent.RecentIndexes.superset`;
the BM25 and embedding rankers alone do the same).

No fused score is calibrated, so abstention is judged on a separate confidence: the embedding
ranker's cosine of the whole query **as written** (no prefix: the prefix lifts ranking but
lowers the cosine's AUROC as a "something fits" signal, 0.853 -> 0.833 on MetaTool; description
blended with the usage examples), plus ``confidence_bm25_weight`` times the normalised BM25
score (the share of the query's term weight the candidate covers; the inner BM25 ranker runs
with ``normalize=True``, which changes no fusion).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from shortlist._events import emit
from shortlist._types import Candidate, Query, Selection
from shortlist.embeddings._base import Embedder, matvec, matvecs
from shortlist.errors import UsageError
from shortlist.rankers._adapter import QueryAdapter
from shortlist.rankers._base import Abstention, Ranker, Scores
from shortlist.rankers._confidence import AnchorConfidence, ConfidenceKind
from shortlist.rankers._embedding import EmbeddingRanker, make_abstention
from shortlist.rankers._fusion import Fusion, cover, fuse, fusion_weights, rank_named_first
from shortlist.rankers._scale import (
    DuplicatesDemoted,
    NameIndex,
    ToolsNamed,
    demote_duplicates,
    named_tools,
    server_scores,
)
from shortlist.rankers._structure import Structure, StructureCache
from shortlist.selection._base import SelectorContext
from shortlist.selection._query import split_intents, without_quoted

__all__ = [
    "DEFAULT_QUERY_PREFIX",
    "TOOL_QUERY_PREFIX",
    "USER_QUERY_PREFIX",
    "Decompose",
    "HybridRanker",
]

#: Where a multi-request query is cut: at explicit joints only ("and also", ", then", ...) or at
#: sentence ends too (``True`` means ``"sentences"``, ``False`` no split).
Decompose = Literal["joints", "sentences"]

#: The text put before the query for the dense score (the BM25 side sees the query alone).
#: A prefix for one-line requests (an option: ``query_prefix=TOOL_QUERY_PREFIX``; it costs a conversation).
TOOL_QUERY_PREFIX = "Which tool can help with this request: "
#: A prefix that suits one-line requests and conversational turns alike (an option; see the module docstring).
USER_QUERY_PREFIX = "The user wants: "
#: The default query prefix: none (see the module docstring for why).
DEFAULT_QUERY_PREFIX = ""

#: Server evidence on by default: each tool gains half the mean of its server's three best fused
#: scores (``docs/evaluation.md``, "Ranking at scale"); a catalog without servers ranks as before.
DEFAULT_SERVER_WEIGHT = 0.5
DEFAULT_SERVER_TOP = 3


@dataclass(frozen=True, slots=True)
class _Scored:
    """One turn's scores: the fused ranking, each part's fused scores, the confidence, the named tools."""

    fused: Scores
    parts: tuple[Scores, ...]
    confidence: Scores
    named: tuple[int, ...] = ()
    desc: Any = None  # the catalog's description vectors (near-duplicates)
    names: NameIndex | None = None
    # scored among a larger indexed catalog (:meth:`EmbeddingRanker.indexed_superset`): that catalog, which of it
    # was asked about, and where each asked candidate is in it; every array above indexes that catalog
    space: tuple[Candidate, ...] | None = None
    keep: Any = None
    positions: Any = None

    def asked(self, values: Scores) -> Scores:
        """``values`` (one per candidate of the space) for the asked candidates, in their order."""
        return values if self.positions is None else np.asarray(values[self.positions], dtype=np.float64)


class HybridRanker(Ranker):
    """BM25 plus embeddings, fused by z-scores (default), by score or by Reciprocal Rank Fusion.

    Args:
        name: registered name.
        embedder: the embedding provider (overridden by :meth:`init`'s; default model otherwise).
        top_k: how many to return when the query does not say.
        fusion: ``"score"`` (default), ``"zscore"`` or ``"rrf"``.
        bm25_weight: weight of the BM25 side (default 0.35 for ``zscore``, 0.2 for ``score``,
            1.0 for ``rrf``).
        dense_weight: weight of the embedding side.
        rrf_k: the RRF constant.
        query_prefix: text put before the query for the description cosine (default "": none;
            :data:`USER_QUERY_PREFIX` and :data:`TOOL_QUERY_PREFIX` are the measured ones).
        decompose: split a multi-request query into its intents and score each: ``"joints"``
            cuts only at explicit joints ("and also", "as well as", ", then", ...),
            ``"sentences"`` (or ``True``) at sentence ends too, ``False`` not at all (default
            ``"joints"``).
        decompose_penalty: subtracted from a part's fused score before the max with the whole
            query's (in the fusion's units; z-score units by default).
        cover_intents: with a split query, put each intent's best candidate right after the
            overall best before filling by score (off by default: measured neutral to slightly
            worse than the max over parts, which already surfaces each intent's best).
        drop_quoted: rank by the query without its quoted spans (a message's payload: the text
            to send, a title, a file name; :func:`~shortlist.selection._query.without_quoted`);
            a tool named inside quotes still ranks first with ``name_match``.
        abstention: when to return nothing, judged on the confidence (see the module).
        min_score: shorthand for ``Abstention(min_score=...)``, in confidence units (cosine
            plus weighted normalised BM25).
        min_margin: shorthand for ``Abstention(min_margin=...)`` (confidence units).
        confidence_bm25_weight: weight of the normalised BM25 score in the confidence (default
            0.5 with ``confidence="cosine"``, 0 with ``"anchors"``).
        confidence: what abstention is judged on: ``"anchors"`` compares the query's cosines with
            the tools against those with generic no-tool requests
            (:class:`~shortlist.rankers._confidence.AnchorConfidence`); ``"cosine"`` is the cosine
            as written plus the weighted BM25 above.
        confidence_anchors: the no-tool requests of ``"anchors"`` (default
            :data:`~shortlist.rankers._confidence.NO_TOOL_ANCHORS`).
        adapter: a :class:`~shortlist.rankers._adapter.QueryAdapter` (or the path of one, as
            ``shortlist feedback train`` writes it), applied to the tools it was trained on.
        adapter_weight: the share of the adapted cosine in those tools' description score.
        adaptive_k: see :class:`~shortlist.rankers._base.Ranker` (applied to fused scores).
        name_match: a tool the query names (any spelling of its name: ``get_weather``,
            ``getWeather``, ``Get-Weather``; spaced words and one-word names only when cued, see
            :mod:`shortlist.rankers._scale`) ranks first, and the ranker does not abstain.
        dedupe: variants of one tool (the same local name, versions aside, and close descriptions:
            one tool on two servers) take one slot of the top ``k``
            (:func:`~shortlist.rankers._scale.demote_duplicates`).
        dedupe_cosine: the description cosine at which two same-named tools are variants.
        dedupe_descriptions: with ``dedupe``, tools with the same description words whose names
            share half their words are variants too (off: a dataset may tell them apart).
        server_weight: each tool gains this times its server's score (the mean of the server's
            ``server_top`` best fused scores; server = ``metadata.server``/``suite``/``mcp_server``,
            an ``mcp__server__``/``server__`` prefix or a dotted prefix); 0 is off.
        server_top: how many of a server's best tools its score averages.
        server_centroid: each tool gains this times the query's cosine to the mean of its server's
            description vectors; 0 is off.
        name_vector: a tool's description cosine is at least this times the cosine to its name
            alone (``"get weather"``), so a two-word tool competes with long descriptions; 0 is off.
        bm25: options for the inner :class:`~shortlist.rankers._bm25.Bm25Ranker`.
        embedding: options for the inner :class:`~shortlist.rankers._embedding.EmbeddingRanker`.
    """

    def __init__(
        self,
        *,
        name: str = "hybrid",
        embedder: Embedder | None = None,
        top_k: int = 10,
        fusion: Fusion = "score",
        bm25_weight: float | None = None,
        dense_weight: float = 1.0,
        rrf_k: float = 60.0,
        query_prefix: str = DEFAULT_QUERY_PREFIX,
        decompose: bool | Decompose = "joints",
        decompose_penalty: float = 0.1,
        cover_intents: bool = False,
        drop_quoted: bool = True,
        abstention: Abstention | Mapping[str, Any] | None = None,
        min_score: float | None = None,
        min_margin: float | None = None,
        adaptive_k: float | None = None,
        confidence_bm25_weight: float | None = None,
        confidence: ConfidenceKind = "cosine",
        confidence_anchors: Sequence[str] | None = None,
        adapter: QueryAdapter | str | None = None,
        adapter_weight: float = 0.5,
        name_match: bool = True,
        dedupe: bool = True,
        dedupe_cosine: float = 0.85,
        dedupe_descriptions: bool = False,
        server_weight: float = DEFAULT_SERVER_WEIGHT,
        server_top: int = DEFAULT_SERVER_TOP,
        server_centroid: float = 0.0,
        name_vector: float = 0.0,
        bm25: Mapping[str, Any] | None = None,
        embedding: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            name=name,
            top_k=top_k,
            abstention=make_abstention(abstention, min_score, min_margin),
            adaptive_k=adaptive_k,
        )
        self.fusion: Fusion = fusion
        self.bm25_weight, self.dense_weight, self.rrf_k = fusion_weights(fusion, bm25_weight, dense_weight, rrf_k)
        if confidence not in ("anchors", "cosine"):
            raise UsageError(f"confidence must be 'anchors' or 'cosine', got {confidence!r}")
        self.confidence: ConfidenceKind = confidence
        self.anchor_confidence = AnchorConfidence(confidence_anchors) if confidence == "anchors" else None
        if confidence_bm25_weight is None:
            confidence_bm25_weight = 0.5 if confidence == "cosine" else 0.0
        if confidence_bm25_weight < 0:
            raise UsageError("confidence_bm25_weight must be >= 0")
        if decompose_penalty < 0:
            raise UsageError("decompose_penalty must be >= 0")
        self.confidence_bm25_weight = float(confidence_bm25_weight)
        self.query_prefix = str(query_prefix)
        if isinstance(decompose, bool):
            split: Decompose | None = "sentences" if decompose else None
        elif decompose in ("joints", "sentences"):
            split = decompose
        else:
            raise UsageError(f"decompose must be true, false, 'joints' or 'sentences', got {decompose!r}")
        self.decompose = split
        self.decompose_penalty = float(decompose_penalty)
        self.cover_intents = bool(cover_intents)
        self.drop_quoted = bool(drop_quoted)
        if not 0.0 <= adapter_weight <= 1.0:
            raise UsageError("adapter_weight must be between 0 and 1")
        self.adapter: QueryAdapter | None = QueryAdapter.load(adapter) if isinstance(adapter, str) else adapter
        self.adapter_weight = float(adapter_weight)
        self._adapter_masks: dict[int, tuple[tuple[Candidate, ...], np.ndarray[Any, np.dtype[np.bool_]]]] = {}
        if not 0.0 < dedupe_cosine <= 1.0:
            raise UsageError("dedupe_cosine must be in (0, 1]")
        if server_weight < 0:
            raise UsageError("server_weight must be >= 0")
        if not 0.0 <= name_vector <= 1.0:
            raise UsageError("name_vector must be between 0 and 1")
        if server_centroid < 0:
            raise UsageError("server_centroid must be >= 0")
        if server_top < 1:
            raise UsageError("server_top must be >= 1")
        self.name_match = bool(name_match)
        self.dedupe = bool(dedupe)
        self.dedupe_cosine = float(dedupe_cosine)
        self.dedupe_descriptions = bool(dedupe_descriptions)
        self.server_weight = float(server_weight)
        self.server_top = int(server_top)
        self.server_centroid = float(server_centroid)
        self.name_vector = float(name_vector)
        self._structures = StructureCache()
        from shortlist.rankers._bm25 import FUSED_EXAMPLES_WEIGHT, Bm25Ranker

        bm25_options = {"normalize": True, "examples_weight": FUSED_EXAMPLES_WEIGHT, **dict(bm25 or {})}
        self.bm25 = Bm25Ranker(name=f"{name}.bm25", top_k=top_k, **bm25_options)
        self.dense = EmbeddingRanker(name=f"{name}.embedding", embedder=embedder, top_k=top_k, **dict(embedding or {}))

    def init(self, ctx: SelectorContext) -> None:
        """Pass the shared embedding provider to the embedding side."""
        self.bm25.init(ctx)
        self.dense.init(ctx)

    def fuse(self, bm25: Scores, dense: Scores) -> Scores:
        """Fuse one BM25 and one embedding score vector with this ranker's settings."""
        return fuse(
            self.fusion, bm25, dense, bm25_weight=self.bm25_weight, dense_weight=self.dense_weight, k=self.rrf_k
        )

    def intents(self, text: str) -> list[str]:
        """The parts a query is scored by besides the whole (``[]``: one request, or ``decompose`` off)."""
        if self.decompose is None:
            return []
        return split_intents(text, sentences=self.decompose == "sentences")

    def _scored(self, query: Query, candidates: Sequence[Candidate], *, confidence: bool = True) -> _Scored:
        text = without_quoted(query.text) if self.drop_quoted else query.text
        texts = [text, *self.intents(text)]
        # Most of an indexed catalog (a search's: the catalog less what the model can call already) is
        # scored among that catalog, whose indexes are built, with the rest masked out before anything
        # compares candidates (BM25's scale, the servers' evidence, the named tools): as the list alone
        # would rank but for BM25's term weights, which stay the whole catalog's. Indexing the list
        # instead took a search a second at 10,000 tools.
        within = self.dense.indexed_superset(candidates)
        keep = positions = None
        if within is not None:
            candidates, positions = within
            keep = np.zeros(len(candidates), dtype=np.bool_)
            keep[positions] = True
        cat = self.dense.scoring_catalog(candidates)
        # The BM25 side gets the catalog's own tuple: its index is then found by element identity,
        # not by comparing every candidate field by field (once per part) when they are equal copies.
        candidates = cat.candidates
        # One model call: each text behind the prefix (its description score); the texts as written
        # too (their example score and, for the whole query, the confidence) only when the catalog
        # has examples or the confidence is asked for, so a zero-shot turn embeds one text.
        prefixed = bool(self.query_prefix)
        as_written = prefixed and (bool(cat.owners.size) or confidence)
        batch = [self.query_prefix + t for t in texts] + (texts if as_written else [])
        vectors = self.dense.embed_queries(batch)
        described = vectors[: len(texts)]
        plain = vectors[len(texts) :] if as_written else described
        adapted = self._adapted_desc(described, cat)
        structure = self._structure(cat.candidates, cat.desc) if self.uses_structure else None
        names = structure.name_vectors if structure is not None else None
        parts: list[Scores] = []
        conf = np.zeros(0, dtype=np.float64)
        # every text's cosines in one pass over the catalog (bit for bit the products text by text)
        descs = matvecs(cat.desc, described) if adapted is None else adapted
        name_sims = matvecs(names, described) if names is not None else None
        for i, text in enumerate(texts):
            desc = descs[i]
            if name_sims is not None:
                # A tool is also matched by its name alone, so a two-word tool is not buried by
                # long descriptions that share words with the query.
                desc = np.maximum(desc, np.float32(self.name_vector) * name_sims[i])
            dense = self.dense.score_vector(plain[i], cat, desc=desc)
            lexical = np.asarray(self.bm25.score(Query(text), candidates), dtype=np.float64)
            if keep is not None:
                lexical = np.where(keep, lexical, 0.0)  # scaled by the asked candidates' best
            parts.append(self.fuse(lexical, dense))
            if i == 0 and confidence:
                # The confidence is the query as written: the prefix helps ranking but blurs the
                # cosine's meaning (AUROC 0.853 -> 0.833 on MetaTool zero-shot).
                raw = self.dense.score_vector(plain[0], cat) if prefixed or names is not None else dense
                conf = raw + self.confidence_bm25_weight * lexical if self.confidence_bm25_weight else raw
                if self.anchor_confidence is not None:
                    conf = self.anchor_confidence.confidence(conf, plain[0], self.dense.embedder)
        if keep is not None:  # the rest of the catalog is out of every comparison from here on
            parts = [np.where(keep, p, -np.inf) for p in parts]
            if confidence:
                conf = np.where(keep, conf, -np.inf)
        fused = parts[0]
        if len(parts) > 1:
            fused = np.maximum(fused, np.max(np.stack(parts[1:]), axis=0) - self.decompose_penalty)
        named: tuple[int, ...] = ()
        if structure is not None:
            if self.server_weight > 0 and structure.layout is not None:
                fused = fused + self.server_weight * server_scores(fused, structure.layout, top=self.server_top)
            if structure.centroids is not None and structure.groups is not None:
                server_cos = matvec(structure.centroids, plain[0]).astype(np.float64)
                fused = fused + self.server_centroid * server_cos[structure.groups]
            if self.name_match:
                found = named_tools(query.text, structure.names)
                if keep is not None:
                    found = {i: n for i, n in found.items() if keep[i]}
                fused, named = rank_named_first(fused, found)
        return _Scored(
            fused,
            tuple(parts[1:]),
            conf if confidence else fused,
            named,
            cat.desc if self.dedupe else None,
            structure.names if structure is not None else None,
            candidates if keep is not None else None,
            keep,
            positions,
        )

    @property
    def uses_structure(self) -> bool:
        """True when a scale lever is on (named tools, near-duplicates or servers)."""
        return (
            self.name_match or self.dedupe or self.server_weight > 0 or self.server_centroid > 0 or self.name_vector > 0
        )

    def _structure(self, candidates: tuple[Candidate, ...], desc: Any) -> Structure:
        """The name phrases and servers of ``candidates`` (cached per candidate list)."""
        embedder = self.dense.embedder if self.name_vector > 0 or self.server_centroid > 0 else None
        return self._structures.get(
            candidates, desc, embedder=embedder, server_centroid=self.server_centroid, name_vector=self.name_vector
        )

    def _adapted_desc(self, vectors: np.ndarray[Any, np.dtype[np.float32]], cat: Any) -> list[Any] | None:
        """Per query vector, the description cosines with the adapter blended in (None: no adapter)."""
        adapter = self.adapter
        if adapter is None:
            return None
        if adapter.matrix.shape[0] != vectors.shape[1]:
            from shortlist.errors import ConfigError

            raise ConfigError(
                f"{self.name}: the adapter maps {adapter.matrix.shape[0]}-d vectors but the embedder gives "
                f"{vectors.shape[1]}-d ones (train it with this ranker's embedder: shortlist feedback train)"
            )
        cached = self._adapter_masks.get(id(cat))
        if cached is None or cached[0] is not cat.candidates:
            mask = np.fromiter(
                (c.id in adapter.tools for c in cat.candidates), dtype=np.bool_, count=len(cat.candidates)
            )
            self._adapter_masks = {id(cat): (cat.candidates, mask)}
        else:
            mask = cached[1]
        return adapter.blended_cosines(cat.desc, vectors, mask, float(self.adapter_weight))

    def score_with_confidence(self, query: Query, candidates: Sequence[Candidate]) -> tuple[Scores, Scores]:
        """Fused scores for ranking (the best of the whole query and its parts); the confidence for abstention."""
        if not candidates:
            empty = np.zeros(0, dtype=np.float64)
            return empty, empty
        scored = self._scored(query, candidates)
        return scored.asked(scored.fused), scored.asked(scored.confidence)

    def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
        """Fused scores, one per candidate (no confidence computed)."""
        if not candidates:
            return np.zeros(0, dtype=np.float64)
        scored = self._scored(query, candidates, confidence=False)
        return scored.asked(scored.fused)

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """As :meth:`Ranker.select` (the confidence is computed only when abstention is set); a split
        query's top ``k`` covers each intent with ``cover_intents``."""
        if not candidates:
            return Selection()
        scored = self._scored(query, candidates, confidence=self.abstention is not None)
        if (
            not scored.named
            and self.abstention is not None
            and self.abstention.abstains(scored.asked(scored.confidence))
        ):
            return Selection(reason="abstained: no candidate fits the query", abstained=True)
        fused = scored.fused
        k = min(query.k or self.top_k, len(candidates))
        if scored.space is not None:  # ranked among its catalog: ids are the catalog's positions
            candidates = scored.space
        # With near-duplicates demoted, rank a window beyond k so the distinct ones can fill it.
        window = min(len(candidates), 3 * k + 10) if self.dedupe else k
        if self.cover_intents and scored.parts:
            order = cover(fused, scored.parts, window)
        elif window < len(candidates):
            top = np.argpartition(-fused, window - 1)[:window]
            order = [int(i) for i in top[np.argsort(-fused[top], kind="stable")]]
        else:
            order = [int(i) for i in np.argsort(-fused, kind="stable")]
        if scored.keep is not None:
            order = [i for i in order if scored.keep[i]]
        if scored.named:
            emit(ToolsNamed(ranker=self.name, ids=tuple(candidates[i].id for i in scored.named)))
        if self.dedupe and scored.names is not None:
            before = order[:k]
            order = demote_duplicates(
                order, scored.names, scored.desc, cosine=self.dedupe_cosine, descriptions=self.dedupe_descriptions
            )[0][:k]
            kept = set(order)
            displaced = tuple(candidates[i].id for i in before if i not in kept)
            if displaced:
                emit(DuplicatesDemoted(ranker=self.name, ids=displaced))
        if self.adaptive_k is not None and order:
            best = fused[order[0]]
            order = [i for i in order if fused[i] >= self.adaptive_k * best] if best > 0 else order[:1]
        return Selection(tuple(candidates[i].id for i in order), scores=tuple(float(fused[i]) for i in order))

    def warm(self, candidates: Sequence[Candidate]) -> float:
        """Build both indexes (BM25 and vectors) for ``candidates``, the scale levers' name phrases and
        servers, and embed the no-tool anchors of ``confidence="anchors"``, so no turn pays for them;
        return the seconds spent."""
        spent = self.bm25.warm(candidates) + self.dense.warm(candidates)
        if self.uses_structure:
            start = time.perf_counter()
            cat = self.dense.scoring_catalog(candidates)
            self._structure(cat.candidates, cat.desc)
            spent += time.perf_counter() - start
        if self.anchor_confidence is not None:
            start = time.perf_counter()
            self.anchor_confidence.vectors(self.dense.embedder)
            spent += time.perf_counter() - start
        return spent
