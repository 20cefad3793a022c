"""``shortlist cache``: show or clear the persistent cache (embedding vectors, optimised model graphs)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from shortlist.cli._output import write_json, write_text

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``cache`` subcommand (``info`` and ``clear``)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "cache",
        help="show or clear the embedding cache",
        description="The persistent cache: embedding vectors keyed by model identity and text, and the "
        "embedding model's optimised graph. Its folder is $SHORTLIST_CACHE_DIR, else "
        "$XDG_CACHE_HOME/shortlist, else ~/.cache/shortlist (SHORTLIST_CACHE_DIR=off turns it off); "
        "the vectors are bounded by $SHORTLIST_CACHE_MAX_MB (default 512).",
    )
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    info = csub.add_parser("info", help="where the cache is, how many vectors of which models, its size")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(func=run_info)
    clear = csub.add_parser("clear", help="delete the cached vectors and model graphs")
    clear.add_argument("--model", help="delete only this model identity's vectors (as `cache info` lists them)")
    clear.add_argument("--json", action="store_true", help="print one JSON object")
    clear.set_defaults(func=run_clear)


def _models_dir(directory: Path) -> list[Path]:
    folder = directory / "models"
    return sorted(folder.glob("*.onnx")) if folder.is_dir() else []


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB"


def run_info(args: argparse.Namespace) -> int:
    """Run ``shortlist cache info``."""
    from shortlist.embeddings._cache import VECTORS_FILE, VectorStore, cache_dir, cache_location, cache_max_mb

    directory = cache_dir()
    location = cache_location()
    if directory is None or location is None:
        out: dict[str, Any] = {"enabled": False, "path": None}
        if args.json:
            write_json(out)
        else:
            write_text("cache: off (SHORTLIST_CACHE_DIR=off)")
        return 0
    path: Path | str = location if isinstance(location, str) else directory / VECTORS_FILE
    vectors: dict[str, Any]
    if isinstance(path, str) or path.is_file():
        store = VectorStore(path, max_mb=cache_max_mb())
        try:
            vectors = store.info().to_dict()
        finally:
            store.close()
    else:
        vectors = {"path": str(path), "exists": False, "vectors": 0, "bytes": 0, "models": {}}
        vectors["max_bytes"] = cache_max_mb() * 1024 * 1024
    graphs: list[dict[str, Any]] = [{"file": str(f), "bytes": f.stat().st_size} for f in _models_dir(directory)]
    out = {"enabled": True, "path": str(directory), "vectors": vectors, "model_graphs": graphs}
    if args.json:
        write_json(out)
        return 0
    lines = [
        f"cache: {directory}",
        f"vectors: {vectors['vectors']} in {_mb(vectors['bytes'])} of {_mb(vectors['max_bytes'])} ({vectors['path']})",
    ]
    lines += [f"  {count:>8}  {model}" for model, count in vectors["models"].items()]
    lines += [f"model graph: {_mb(g['bytes'])}  {g['file']}" for g in graphs]
    write_text("\n".join(lines))
    return 0


def run_clear(args: argparse.Namespace) -> int:
    """Run ``shortlist cache clear``."""
    from shortlist.embeddings._cache import VECTORS_FILE, VectorStore, cache_dir, cache_location

    directory = cache_dir()
    location = cache_location()
    if directory is None or location is None:
        write_json({"enabled": False}) if args.json else write_text("cache: off (SHORTLIST_CACHE_DIR=off)")
        return 0
    path: Path | str = location if isinstance(location, str) else directory / VECTORS_FILE
    deleted = 0
    if isinstance(path, str) or path.is_file():
        store = VectorStore(path)
        try:
            deleted = store.clear(args.model)
        finally:
            store.close()
    graphs = 0
    if args.model is None:
        graphs = len(_models_dir(directory))
        shutil.rmtree(directory / "models", ignore_errors=True)
    if args.json:
        write_json(
            {"enabled": True, "path": str(directory), "vectors_deleted": deleted, "model_graphs_deleted": graphs}
        )
    else:
        write_text(f"deleted {deleted} vectors and {graphs} model graph(s) from {directory}")
    return 0
