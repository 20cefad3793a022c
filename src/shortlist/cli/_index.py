"""``shortlist index``: build a document index for grounding (incrementally), query it, verify it, and
rebuild a PostgreSQL corpus's HNSW graph."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shortlist.cli._output import fail, write_json, write_text
from shortlist.cli._progress import add_progress_flag, progress_line
from shortlist.errors import ConfigError

__all__ = ["register"]

_SIDECAR = "shortlist-index.json"  # = shortlist.retrieval._backends.opening.INDEX_DESCRIPTION


def register(sub: Any) -> None:
    """Add the ``index`` subcommand (``build``, ``query``, ``verify`` and ``rebuild-hnsw``)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "index",
        help="build and query a document index for grounding",
        description="Index host documents (JSONL or a folder of .txt/.md), query them, verify an index.",
    )
    isub = p.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    b = isub.add_parser("build", help="index documents; re-indexes only what changed (by content hash)")
    b.add_argument("--docs", required=True, help="JSONL of {id,title,text,metadata} or a folder of .txt/.md files")
    b.add_argument("--path", help="index folder (embedded files, or Qdrant local files; not for postgres)")
    b.add_argument(
        "--backend", choices=["embedded", "qdrant", "postgres"], default="embedded", help="default: embedded"
    )
    b.add_argument(
        "--embedder",
        default="default",
        help="'default' (all-MiniLM-L6-v2, offline) or 'hashing' (fast, lexical only; for tests)",
    )
    b.add_argument("--url", help="Qdrant server URL (instead of local files under --path), or postgresql://...")
    b.add_argument("--api-key-env", default="QDRANT_API_KEY", help="env var holding the Qdrant API key")
    b.add_argument(
        "--collection", default="shortlist", help="Qdrant collection or PostgreSQL corpus (default: shortlist)"
    )
    b.add_argument("--chunk-words", type=int, default=200, help="words per chunk for a new index")
    b.add_argument("--chunk-overlap", type=int, default=40, help="words shared by consecutive chunks")
    b.add_argument("--keep-missing", action="store_true", help="do not delete documents absent from --docs")
    _graph_flags(b, "a new postgres corpus's HNSW graph: ")
    b.add_argument("--quiet", action="store_true", help="no progress line (same as --no-progress)")
    b.add_argument("--json", action="store_true", help="print the report as JSON")
    add_progress_flag(b)
    b.set_defaults(func=run_build)

    q = isub.add_parser("query", help="print the documents relevant to QUERY (nothing when none is)")
    q.add_argument("query", metavar="QUERY")
    q.add_argument(
        "--path", required=True, help="index folder, or the postgresql://...?corpus=NAME of a postgres index"
    )
    q.add_argument("--k", type=int, default=5, help="most results (default 5)")
    q.add_argument("--scoring", choices=["hybrid", "lexical", "overlap"], default="hybrid")
    q.add_argument("--json", action="store_true", help='print {"results": [{"id","title","score","text"}]}')
    add_progress_flag(q)
    q.set_defaults(func=run_query)

    r = isub.add_parser(
        "rebuild-hnsw",
        help="rebuild a postgres corpus's HNSW graph with new parameters, without reloading its passages",
        description="Builds the new graph beside the old one (queries go on; writes wait), then drops the old.",
    )
    r.add_argument("--path", required=True, help="the postgresql://...?corpus=NAME of a postgres index")
    _graph_flags(r, "")
    r.add_argument("--json", action="store_true", help='print {"corpus", "hnsw", "seconds"}')
    add_progress_flag(r)
    r.set_defaults(func=run_rebuild_hnsw)

    v = isub.add_parser(
        "verify",
        help="check an embedded index: its files, sizes and sha256 against the manifest (exit 1 if damaged)",
    )
    v.add_argument("--path", required=True, help="index folder")
    v.add_argument("--json", action="store_true", help='print {"ok", "path", "generation", "files", "problems"}')
    v.set_defaults(func=run_verify)


def _graph_flags(p: argparse.ArgumentParser, prefix: str) -> None:
    p.add_argument("--hnsw-m", type=int, help=f"{prefix}links per node (default 32)")
    p.add_argument("--hnsw-ef-construction", type=int, help=f"{prefix}build candidates (default 256)")
    p.add_argument("--hnsw-storage", choices=["halfvec", "vector"], help=f"{prefix}what it holds (default halfvec)")
    p.add_argument(
        "--hnsw-shards", type=int, help=f"{prefix}partial graphs each query walks at once (default 1; one per core)"
    )


def _graph_options(args: argparse.Namespace) -> dict[str, Any]:
    """The graph flags given, as ``PostgresBackend.rebuild_hnsw`` names them."""
    given = {
        "m": args.hnsw_m,
        "ef_construction": args.hnsw_ef_construction,
        "storage": args.hnsw_storage,
        "shards": args.hnsw_shards,
    }
    return {k: v for k, v in given.items() if v is not None}


def _counter(tick: Any, task: str, total: int) -> Any:
    """A progress callback adding up what it is told and drawing ``task`` done of ``total``."""
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        tick(task, done, total)

    tick(task, 0, total)
    return step


def _open(
    path: Path | str,
    *,
    backend: str | None,
    embedder_name: str | None,
    args: argparse.Namespace | None,
    hnsw: dict[str, Any] | None = None,
) -> Any:
    """Open the index at ``path``: from its description when it exists, else as the args say."""
    from shortlist.retrieval._backends.opening import open_index
    from shortlist.retrieval._document import Chunker

    return open_index(
        path,
        backend=backend,
        embedder_name=embedder_name,
        url=args.url if args is not None else None,
        api_key_env=args.api_key_env if args is not None else "QDRANT_API_KEY",
        collection=args.collection if args is not None else "shortlist",
        chunker=Chunker(args.chunk_words, args.chunk_overlap) if args is not None else None,
        hnsw=hnsw,
    )


def run_build(args: argparse.Namespace) -> int:
    """Run ``shortlist index build``."""
    from shortlist.retrieval._loader import load_documents

    docs = load_documents(args.docs)
    if args.backend == "postgres" and not args.url:
        raise ConfigError("--backend postgres needs --url postgresql://...")
    graph = _graph_options(args)
    if graph and args.backend != "postgres":
        raise ConfigError("--hnsw-* options are for --backend postgres")
    if args.backend != "postgres" and not args.path:
        raise ConfigError("--path is required (the index folder)")
    path = Path(args.path or "")
    if args.backend != "postgres":
        path.mkdir(parents=True, exist_ok=True)
    index = _open(
        args.url if args.backend == "postgres" else path,
        backend=args.backend,
        embedder_name=args.embedder,
        args=args,
        hnsw=graph,
    )
    try:
        with progress_line(args) as tick:  # documents done, and the embedding's batches as they run
            step = _counter(tick, "indexing documents", len(docs))
            report = index.upsert(docs, progress=step) if args.keep_missing else index.sync(docs, progress=step)
        total = index.count()
    finally:
        index.close()
    if args.backend == "qdrant":
        sidecar = {"backend": "qdrant", "embedder": index.embedder.model_name, "collection": args.collection}
        if args.url:
            sidecar.update(url=args.url, api_key_env=args.api_key_env)
        (path / _SIDECAR).write_text(json.dumps(sidecar, indent=1), encoding="utf-8")
    if args.backend == "postgres":
        from shortlist.retrieval._backends.postgres import redact_url

        where = f"{redact_url(index.dsn)} (corpus {index.corpus})"
    else:
        where = str(path)
    out = {**report.to_dict(), "documents": total, "backend": args.backend, "path": where}
    if args.json:
        write_json(out)
    else:
        write_text(
            f"{out['added']} added, {out['updated']} updated, {out['unchanged']} unchanged, "
            f"{out['deleted']} deleted; {total} documents in {where} ({args.backend})"
        )
    return 0


def run_query(args: argparse.Namespace) -> int:
    """Run ``shortlist index query``."""
    from shortlist.retrieval._corpus import CorpusRetriever

    if args.k < 1:
        raise ConfigError("--k must be >= 1")
    from shortlist.retrieval._backends.opening import is_postgres_url

    path = Path(args.path)
    if not is_postgres_url(args.path) and not path.is_dir():
        raise ConfigError(f"{path}: no such index folder")
    index = _open(args.path if is_postgres_url(args.path) else path, backend=None, embedder_name=None, args=None)
    try:
        with progress_line(args):  # loading the model, on a cold start
            found = CorpusRetriever(backend=index, k=args.k, scoring=args.scoring).retrieve(args.query)
    finally:
        index.close()
    results = [
        {
            "id": m.metadata["document_id"],
            "title": m.metadata.get("title", ""),
            "score": m.confidence,
            "text": m.content,
            "citation_id": m.metadata["citation_id"],
        }
        for m in found
    ]
    if args.json:
        write_json({"results": results})
    elif not results:
        write_text("no relevant document")
    else:
        write_text("\n".join(f"{r['score']:.3f}  {r['id']}  {r['title']}" for r in results))
    return 0


def run_rebuild_hnsw(args: argparse.Namespace) -> int:
    """Run ``shortlist index rebuild-hnsw``."""
    import time

    from shortlist.retrieval._backends.opening import is_postgres_url
    from shortlist.retrieval._backends.postgres import PostgresBackend

    if not is_postgres_url(args.path):
        raise ConfigError("rebuild-hnsw rebuilds a postgres corpus: --path postgresql://...?corpus=NAME")
    graph = _graph_options(args)
    if not graph:
        raise ConfigError("say what to change: --hnsw-m, --hnsw-ef-construction, --hnsw-storage or --hnsw-shards")
    index = _open(args.path, backend=None, embedder_name=None, args=None)
    assert isinstance(index, PostgresBackend)
    try:
        total = int((PostgresBackend.describe(index.dsn, index.corpus) or {}).get("chunks") or 0)  # passages
        t0 = time.perf_counter()
        with progress_line(args) as tick:
            layout = index.rebuild_hnsw(progress=_counter(tick, "indexing passages", total), **graph)
        seconds = round(time.perf_counter() - t0, 1)
    finally:
        index.close()
    if args.json:
        write_json({"corpus": index.corpus, "hnsw": layout, "seconds": seconds})
    else:
        shown = ", ".join(f"{k}={v}" for k, v in layout.items())
        write_text(f"corpus {index.corpus}: HNSW graph {shown} ({seconds} s)")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """Run ``shortlist index verify``: 0 when the index is sound, 1 with every problem listed."""
    from shortlist.retrieval._backends.embedded import verify_index
    from shortlist.retrieval._backends.opening import INDEX_DESCRIPTION, describe_index

    path = Path(args.path)
    if not path.is_dir():
        raise ConfigError(f"{path}: no such index folder")
    kind = describe_index(path).get("backend") if (path / INDEX_DESCRIPTION).is_file() else "embedded"
    if kind != "embedded":
        raise ConfigError(f"{path} holds a {kind} index: verify checks embedded indexes (Qdrant checks its own)")
    found = verify_index(path)
    if args.json:
        write_json(
            {
                "ok": found.ok,
                "path": found.path,
                "generation": found.generation,
                "files": found.files,
                "checksums": found.checksums,
                "documents": found.documents,
                "problems": [{"file": p.file, "problem": p.problem} for p in found.problems],
            }
        )
    elif found.ok:
        write_text(
            f"ok: {found.path} ({found.generation}, {found.files} files, sha256 verified, {found.documents} documents)"
        )
    else:
        write_text("\n".join(str(p) for p in found.problems))
    if found.ok:
        return 0
    return fail(f"index verify: {path}: {len(found.problems)} problem(s), see above", code=1)
