"""Quality and latency of the dense rankers (embedding, hybrid) on MetaTool and synthetic catalogs.

Usage::

    python bench/bench_dense.py quality [--data DIR] [--vector-cache FILE]
    python bench/bench_dense.py latency [--sizes 100,1000,10000,100000] [--turns 200]

``quality`` ranks the whole MetaTool catalog for every query, zero-shot and with the
examples of ``train.jsonl``, and prints nDCG@10 / Recall@5 per ranker and split, plus the
hybrid's abstention trade-off (threshold -> correct abstention on empty-gold queries vs
Recall@5 on the others with abstention on). ``--vector-cache`` keeps the default model's
vectors in an ``.npz`` between runs (embedding the 18k training queries takes minutes).

``latency`` measures one turn (k = 5, cached index, a fresh query each turn so the query
embedding is always paid) at each catalog size; the "(no query model)" rows replace the
query embedding by a fixed vector, to show the ranker's own per-turn cost.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shortlist._types import Candidate, Query
from shortlist.embeddings._base import Embedder, Vectors
from shortlist.embeddings._default import DefaultEmbedder
from shortlist.rankers._base import Abstention, Ranker
from shortlist.rankers._bm25 import Bm25Ranker
from shortlist.rankers._embedding import EmbeddingRanker
from shortlist.rankers._hybrid import HybridRanker

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "metatool"


class CachedEmbedder(Embedder):
    """Wraps an embedder with a text -> vector dict persisted in an ``.npz`` file."""

    def __init__(self, inner: Embedder, path: Path | None) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.path = path
        self.vecs: dict[str, np.ndarray] = {}
        if path and path.exists():
            z = np.load(path, allow_pickle=False)
            self.vecs = dict(zip(z["texts"].tolist(), z["vecs"], strict=True))

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        miss = [t for t in dict.fromkeys(texts) if t not in self.vecs]
        if miss:
            for t, v in zip(miss, self.inner.embed(miss), strict=True):
                self.vecs[t] = v
        return np.stack([self.vecs[t] for t in texts])

    def save(self) -> None:
        if self.path:
            texts = list(self.vecs)
            np.savez(self.path, texts=np.array(texts), vecs=np.stack([self.vecs[t] for t in texts]))


def load(data: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    def rows(name: str) -> list[dict[str, Any]]:
        with (data / name).open() as fh:
            return [json.loads(line) for line in fh if line.strip()]

    return rows("tools.jsonl"), rows("queries.jsonl"), rows("train.jsonl")


def ranked(ranker: Ranker, queries: list[dict[str, Any]], cands: list[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """Return (top-10 index matrix, confidence matrix best score) for every query."""
    tops = np.empty((len(queries), 10), dtype=np.int64)
    conf = np.empty(len(queries))
    for i, q in enumerate(queries):
        s, c = ranker.score_with_confidence(Query(q["text"]), cands)
        tops[i] = np.argsort(-s, kind="stable")[:10]
        conf[i] = float(np.max(c))
    return tops, conf


def metrics(tops: np.ndarray, golds: list[set[int]], mask: np.ndarray) -> tuple[float, float]:
    nd, r5 = [], []
    for i in np.where(mask)[0]:
        g = golds[i]
        top = tops[i].tolist()
        r5.append(len(g & set(top[:5])) / min(5, len(g)))
        dcg = sum(1 / np.log2(r + 2) for r, t in enumerate(top) if t in g)
        nd.append(dcg / sum(1 / np.log2(r + 2) for r in range(min(10, len(g)))))
    return float(np.mean(nd)), float(np.mean(r5))


def quality(args: argparse.Namespace) -> None:
    tools, queries, train = load(Path(args.data))
    pos = {t["id"]: i for i, t in enumerate(tools)}
    examples: list[list[str]] = [[] for _ in tools]
    for row in train:
        for g in row["gold"]:
            examples[pos[g]].append(row["text"])
    golds = [{pos[g] for g in q["gold"]} for q in queries]
    has = np.array([bool(g) for g in golds])
    splits = sorted({q["split"] for q in queries})
    emb = CachedEmbedder(DefaultEmbedder(), Path(args.vector_cache) if args.vector_cache else None)
    rankers: dict[str, Ranker] = {
        "bm25": Bm25Ranker(),
        "embedding": EmbeddingRanker(embedder=emb),
        "hybrid(score)": HybridRanker(embedder=emb),
        "hybrid(rrf)": HybridRanker(embedder=emb, fusion="rrf"),
    }
    for mode in ("zero-shot", "examples"):
        cands = [
            Candidate(t["id"], t["name"], t["description"], examples=tuple(examples[i]) if mode == "examples" else ())
            for i, t in enumerate(tools)
        ]
        for label, ranker in rankers.items():
            tops, conf = ranked(ranker, queries, cands)
            nd, r5 = metrics(tops, golds, has)
            per = {}
            for sp in splits:
                in_split = np.array([q["split"] == sp for q in queries])
                per[sp] = tuple(round(x, 3) for x in metrics(tops, golds, has & in_split))
            print(f"{mode:10s} {label:14s} nDCG@10 {nd:.3f} Recall@5 {r5:.3f}  {per}", flush=True)
            if label == "hybrid(score)":
                abstention_curve(tops, conf, golds, has)
        emb.save()


def abstention_curve(tops: np.ndarray, conf: np.ndarray, golds: list[set[int]], has: np.ndarray) -> None:
    r5 = np.array([len(g & set(tops[i, :5].tolist())) / min(5, len(g)) if g else 0.0 for i, g in enumerate(golds)])
    for t in np.arange(0.30, 0.62, 0.02):
        ab = conf < t
        kept = np.where(ab, 0, r5)[has].mean()
        print(f"    min_score {t:.2f}: abstention {ab[~has].mean():.3f}  recall@5_abstaining {kept:.3f}")


WORDS = [f"w{i}" for i in range(5000)] + ["weather", "email", "calendar", "file", "search", "stock", "travel", "music"]


def latency(args: argparse.Namespace) -> None:
    rng = random.Random(0)
    texts = [q["text"] for q in load(Path(args.data))[1]] if (Path(args.data) / "queries.jsonl").exists() else []
    rng.shuffle(texts)

    def query_text(turn: int) -> str:
        # Real MetaTool queries when the data is there (their length is what a turn costs).
        if texts:
            return texts[turn % len(texts)]
        return " ".join(rng.choices(WORDS, k=6)) + f" {turn}"

    emb = DefaultEmbedder(query_cache_size=0)
    emb.load()
    dim = emb.dim
    for n in [int(s) for s in args.sizes.split(",")]:
        cands = [Candidate(f"tool_{i}", f"tool_{i}", " ".join(rng.choices(WORDS, k=20))) for i in range(n)]
        # Precomputed random vectors stand in for the catalog's embeddings (embedding 100k
        # descriptions would take ~10 minutes); the query is embedded for real every turn.
        vecs = np.random.default_rng(n).standard_normal((n, dim)).astype(np.float32)
        lookup = {c.description: vecs[i] for i, c in enumerate(cands)}

        class Stub(Embedder):
            """Catalog vectors from ``lookup``; the query through the real model."""

            model_name = emb.model_name

            def __init__(self, table: dict[str, np.ndarray], real_query: bool = True) -> None:
                self.table = table
                self.real_query = real_query
                self.qvec = np.random.default_rng(1).standard_normal((1, dim)).astype(np.float32)

            def embed_batch(self, texts: Sequence[str]) -> Vectors:
                if len(texts) == 1 and not texts[0].startswith("tool_"):
                    return emb.embed_batch(texts) if self.real_query else self.qvec
                return np.stack([self.table[t.split(": ", 1)[1]] for t in texts])

        for label, ranker in (
            ("embedding", EmbeddingRanker(embedder=Stub(lookup))),
            ("hybrid", HybridRanker(embedder=Stub(lookup))),
            ("hybrid+abst", HybridRanker(embedder=Stub(lookup), abstention=Abstention(min_score=0.47))),
            ("embedding (no query model)", EmbeddingRanker(embedder=Stub(lookup, real_query=False))),
            ("hybrid (no query model)", HybridRanker(embedder=Stub(lookup, real_query=False))),
        ):
            t0 = time.perf_counter()
            ranker.warm(cands) if hasattr(ranker, "warm") else None
            build = time.perf_counter() - t0
            times = []
            for turn in range(args.turns):
                q = Query(query_text(turn + n), k=5)
                t = time.perf_counter()
                ranker.select(q, cands)
                times.append((time.perf_counter() - t) * 1e3)
            p50, p99 = np.percentile(times, [50, 99])
            print(f"N={n:>7} {label:28s} build {build:6.2f}s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms", flush=True)
    times = []
    for turn in range(args.turns):
        t = time.perf_counter()
        emb.embed([query_text(turn)])
        times.append((time.perf_counter() - t) * 1e3)
    print(f"query embedding alone: p50 {np.percentile(times, 50):.2f} ms  p99 {np.percentile(times, 99):.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--data", default=str(DATA))
    q.add_argument("--vector-cache", default=None)
    lat = sub.add_parser("latency")
    lat.add_argument("--sizes", default="100,1000,10000,100000")
    lat.add_argument("--turns", type=int, default=200)
    lat.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    quality(args) if args.cmd == "quality" else latency(args)


if __name__ == "__main__":
    main()
