"""The int8 query model against the float one: how near its vectors are, and how fast, with and without smoothing.

Embeds the same distinct real queries (MetaTool's query texts and the BFCL conversations' user
messages, interleaved: ``bench_scale.queries``; none is a calibration text) one at a time on one
thread, on the float model and on the int8 query model derived as shipped (activations smoothed,
``embeddings/_smoothing.py``) and derived without smoothing, each int8 model in a cache directory of
its own (so each is derived in this run). Reports each int8 model's cosine to the float vectors (mean,
worst, 1st percentile) and p50 / p99 of one query's embedding in ms, all in one run so they share the
machine's state::

    OMP_NUM_THREADS=1 python bench/bench_query_model.py [--queries 300] [--json]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _embed_each(embedder: Any, texts: list[str]) -> tuple[np.ndarray[Any, Any], list[float]]:
    embedder.embed_queries(["a first query loads the session"])
    vectors, ms = [], []
    for text in texts:
        start = time.perf_counter()
        vectors.append(embedder.embed_queries([text])[0])
        ms.append((time.perf_counter() - start) * 1000)
    return np.asarray(vectors), ms


def main(argv: list[str] | None = None) -> int:
    from bench_scale import queries
    from shortlist.embeddings import _query_model
    from shortlist.embeddings._cache import ENV_CACHE_DIR
    from shortlist.embeddings._default import TOOLS_MODEL_NAME, DefaultEmbedder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", type=int, default=300, help="distinct queries")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    texts = queries(args.queries)

    def embedder(precision: str) -> DefaultEmbedder:
        return DefaultEmbedder(model=TOOLS_MODEL_NAME, vector_cache=None, query_cache_size=0, query_precision=precision)  # type: ignore[arg-type]

    def unsmoothed(source: Path, out: Path, rows: object, **_: object) -> int:
        shutil.copyfile(source, out)
        return 0

    floats, float_ms = _embed_each(embedder("float32"), texts)
    rows: dict[str, dict[str, float]] = {"float32": _times(float_ms)}
    smooth = _query_model.smooth_activations
    for label, smoothing in (("int8", smooth), ("int8-unsmoothed", unsmoothed)):
        cache = tempfile.mkdtemp(prefix="shortlist-bench-query-model-")
        os.environ[ENV_CACHE_DIR] = cache
        _query_model.smooth_activations = smoothing  # type: ignore[assignment]
        try:
            vectors, ms = _embed_each(embedder("int8"), texts)
        finally:
            _query_model.smooth_activations = smooth
            shutil.rmtree(cache, ignore_errors=True)
        cos = np.sum(vectors * floats, axis=1)
        rows[label] = {
            "cosine_mean": round(float(cos.mean()), 4),
            "cosine_min": round(float(cos.min()), 4),
            "cosine_p1": round(float(np.percentile(cos, 1)), 4),
            **_times(ms),
        }
    if args.json:
        print(json.dumps({"queries": len(texts), "models": rows}, indent=2))
        return 0
    print(f"{len(texts)} queries, one at a time, one thread")
    print(f"{'model':<18}{'cos mean':>10}{'worst':>8}{'p1':>8}{'p50 ms':>9}{'p99 ms':>9}")
    for label, row in rows.items():
        widths = (("cosine_mean", 10), ("cosine_min", 8), ("cosine_p1", 8))
        cos_cells = "".join(f"{row[k]:>{w}.4f}" if k in row else " " * w for k, w in widths)
        print(f"{label:<18}{cos_cells}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}")
    return 0


def _times(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2)}


if __name__ == "__main__":
    raise SystemExit(main())
