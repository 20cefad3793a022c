"""Catalog enrichment on MetaTool with a stand-in for the host's model, in process and over HTTP.

The stand-in model reads each tool's name out of the enrichment prompt (the fenced
``name:`` line) and answers with 10 of that tool's MetaTool *train* queries (the tool's
queries of ``train.jsonl`` in file order, a query with two gold tools counting for both; all
of them when it has 10 or fewer), picked by one of two fixed rules:

* ``spread`` (the default; the prompt asks for *varied* requests, and this mirrors it): the
  tool's train queries are embedded with the default embedder (unit vectors); 10 centres are
  seeded by farthest-point traversal (start: the query with the largest dot product with the
  mean vector; next: the query whose cosine to its nearest chosen one is smallest), refined by
  20 rounds of spherical k-means (each query to the centre of largest cosine; a centre becomes
  the normalised mean of its queries, an empty one stays); then for each centre in order the
  nearest query not picked yet. The 10 are answered in file order. No randomness.
* ``random``: ``random.Random(f"18:{tool}").sample(queries, 10)``.

This stands in for an LLM writing requests from the description (MetaTool's queries were
written by one, from the descriptions), so the figure measures the mechanism (prompt,
parsing, cleaning, the feedback log as examples, the ranker's use of them), not a real
model's wording. The evaluation queries (``queries.jsonl``) are never shown to the stand-in.

Rows (the library's default selector, every MetaTool query, whole catalog):

* ``zero-shot``: no examples.
* ``enriched``: ``CatalogEnricher`` with the ``spread`` stand-in as a ``prompt -> str`` callable.
* ``enriched-random``: the same with the ``random`` stand-in.
* ``enriched-http``: ``shortlist catalog enrich`` run as a subprocess against an
  OpenAI-compatible chat-completions server on 127.0.0.1 that answers as the ``spread``
  stand-in does (end to end: HTTP, retries, the CLI, the SQLite log), then evaluated on that log.

Usage::

    OMP_NUM_THREADS=1 python bench/bench_enrichment.py --metatool ../shared/data/metatool --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_TOOL = re.compile(r'<tool number="(\d+)">\nname: ([^\n]*)')
SEED = 18
N = 10


def spread(vectors: Any, n: int, rounds: int = 20) -> list[int]:
    """Indexes of ``n`` rows spread over ``vectors`` (unit rows): farthest-point seeds, spherical
    k-means, then each centre's nearest row not taken yet; sorted."""
    import numpy as np

    x = np.asarray(vectors, dtype=np.float64)
    chosen = [int(np.argmax(x @ x.mean(axis=0)))]
    nearest = x @ x[chosen[0]]
    while len(chosen) < n:
        j = int(np.argmin(nearest))
        chosen.append(j)
        nearest = np.maximum(nearest, x @ x[j])
    centres = x[chosen].copy()
    for _ in range(rounds):
        owner = np.argmax(x @ centres.T, axis=1)
        for k in range(n):
            members = x[owner == k]
            if len(members):
                mean = members.mean(axis=0)
                centres[k] = mean / np.linalg.norm(mean)
    picked: list[int] = []
    for k in range(n):
        for j in np.argsort(-(x @ centres[k]), kind="stable"):
            if int(j) not in picked:
                picked.append(int(j))
                break
    return sorted(picked)


class StandIn:
    """The stand-in host model: ``prompt -> JSON`` with 10 train queries per fenced tool."""

    def __init__(self, train: Path, n: int = N, rule: str = "spread") -> None:
        if rule not in ("spread", "random"):
            raise ValueError(f"rule must be 'spread' or 'random', not {rule!r}")
        self.n = n
        self.rule = rule
        self.by_tool: dict[str, list[str]] = {}
        with train.open(encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                for g in row["gold"]:
                    self.by_tool.setdefault(g, []).append(row["text"])
        self.picks: dict[str, list[str]] = {}
        if rule == "spread":
            from shortlist.embeddings._default import default_embedder

            embedder = default_embedder()
            for tool, queries in self.by_tool.items():
                if len(queries) > n:
                    self.picks[tool] = [queries[i] for i in spread(embedder.embed(queries), n)]
        self.calls = 0
        self._lock = threading.Lock()

    def pick(self, tool: str) -> list[str]:
        queries = self.by_tool.get(tool, [])
        if len(queries) <= self.n:
            return list(queries)
        if self.rule == "spread":
            return self.picks[tool]
        return random.Random(f"{SEED}:{tool}").sample(queries, self.n)

    def __call__(self, prompt: str) -> str:
        with self._lock:
            self.calls += 1
        names = [m.group(2) for m in _TOOL.finditer(prompt)]
        return json.dumps({str(i): self.pick(name) for i, name in enumerate(names, 1)})


def _serve(model: StandIn) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][-1]["content"]
            content = model(prompt)
            data = json.dumps(
                {
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def _eval(tools: Any, dataset: Any) -> dict[str, Any]:
    from dataclasses import replace

    from shortlist.eval._runner import run_eval
    from shortlist.rankers._registry import DEFAULT_SELECTOR, create_builtin_selector

    selector = create_builtin_selector(DEFAULT_SELECTOR)
    rep = run_eval(selector, replace(dataset, tools=tuple(tools)), progress=False)
    keep = ("ndcg@10", "recall@5", "recall@1", "mrr@10")
    return {
        **{k: rep[k] for k in keep},
        "splits": {s: {k: v[k] for k in ("ndcg@10", "recall@5")} for s, v in rep["splits"].items()},
        "selector": rep["selector"],
    }


def main(argv: list[str] | None = None) -> int:
    from shortlist.enrichment import CatalogEnricher, EnrichmentStore
    from shortlist.eval._datasets import load_dataset
    from shortlist.feedback import FeedbackStore

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--metatool", type=Path, required=True)
    p.add_argument("--rows", default="zero-shot,enriched,enriched-random,enriched-http")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    dataset = load_dataset(args.metatool)
    rows = args.rows.split(",")
    out: dict[str, Any] = {
        "stand_in": {
            "spread": f"{N} train queries per tool: farthest-point seeds, 20 rounds of spherical k-means, "
            "each centre's nearest query (default embedder)",
            "random": f"{N} train queries per tool, random.Random('{SEED}:<tool>').sample",
        }
    }
    with tempfile.TemporaryDirectory() as tmp:
        if "zero-shot" in rows:
            out["zero-shot"] = _eval(dataset.tools, dataset)
        for row, rule in (("enriched", "spread"), ("enriched-random", "random")):
            if row not in rows:
                continue
            model = StandIn(args.metatool / "train.jsonl", rule=rule)
            with EnrichmentStore(Path(tmp) / f"{row}.sqlite") as store:
                report = CatalogEnricher(model, store=store, model_id="stand-in", concurrency=4).enrich(dataset.tools)
                tools = store.feedback.enrich(dataset.tools, kind="tool")
            out[row] = {**_eval(tools, dataset), "enrichment": report.to_dict()}
        if "enriched-http" in rows:
            model = StandIn(args.metatool / "train.jsonl")
            httpd, base_url = _serve(model)
            db = Path(tmp) / "http.sqlite"
            try:
                cmd = [sys.executable, "-m", "shortlist.cli", "catalog", "enrich", "--catalog"]
                cmd += [str(args.metatool / "tools.jsonl"), "--db", str(db), "--base-url", base_url]
                cmd += ["--model", "stand-in", "--json", "--no-progress"]
                env = {**os.environ, "OMP_NUM_THREADS": "1"}
                done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
            finally:
                httpd.shutdown()
                httpd.server_close()
            with FeedbackStore(db) as log:
                tools = log.enrich(dataset.tools, kind="tool")
            out["enriched-http"] = {**_eval(tools, dataset), "enrichment": json.loads(done.stdout)}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for name, row in out.items():
            if isinstance(row, dict):
                print(f"{name:16s} nDCG@10 {row['ndcg@10']}  R@5 {row['recall@5']}  multi {row['splits'].get('multi')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
