"""Cold and warm wall time of the CLI and the service, each in a fresh process.

"Cold" is the first process with an empty cache directory (``SHORTLIST_CACHE_DIR`` pointing at a
new temporary folder: nothing embedded yet); "warm" is the next processes, sharing that folder.
Measured: ``shortlist select`` on the bundled 38-tool catalog and on MetaTool's 199 tools
(``../shared/data/metatool/tools.jsonl`` relative to the repository) with the default selector,
``--selector embedding`` and ``--selector bm25``; ``shortlist index query`` on an index of the
repository's ``docs/``; and ``shortlist serve``'s time until ``/readyz`` answers 200.

Every figure is the median wall time of ``--repeat`` runs (the cold one is a single run per
repeat, each with a new cache folder). The machine is noisy: compare ratios within one run
(``warm / bm25``), not absolute times across runs.

    OMP_NUM_THREADS=1 python bench/bench_cold_start.py [--repeat 3] [--json OUT] [--only select]

To measure another checkout with the same venv (the "before" figures), point ``--src`` at its
``src`` folder: ``python bench/bench_cold_start.py --src /tmp/before/src``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
METATOOL = REPO.parent / "shared" / "data" / "metatool" / "tools.jsonl"
QUERY = "what's the weather in Paris tomorrow"


def _env(src: Path, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    env["SHORTLIST_CACHE_DIR"] = str(cache)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _cli(src: Path, cache: Path, args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "shortlist.cli", *args],
        env=_env(src, cache),
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"shortlist {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(src: Path, cache: Path, catalog: Path) -> float:
    port = _free_port()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shortlist.cli", "serve", "--port", str(port), "--catalog", f"tools={catalog}"],
        env=_env(src, cache),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = start + 300
        while time.perf_counter() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"serve exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - start
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise SystemExit("serve not ready within 300 s")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _measure(run: Any, repeat: int, tmp: Path) -> dict[str, float]:
    """Median cold (fresh cache folder each time) and warm (the folder of the last cold run) seconds."""
    cold: list[float] = []
    warm: list[float] = []
    for i in range(repeat):
        cache = tmp / f"cache-{time.monotonic_ns()}-{i}"
        cold.append(run(cache))
        warm.append(run(cache))
    for _ in range(max(0, repeat - 1)):
        warm.append(run(cache))
    return {"cold_s": round(statistics.median(cold), 3), "warm_s": round(statistics.median(warm), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the shortlist sources to run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--only", choices=["select", "index", "serve"], action="append", help="a subset")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if not METATOOL.is_file():
        raise SystemExit(f"{METATOOL} is missing (the MetaTool catalog, next to the repository)")
    only = set(args.only or ["select", "index", "serve"])
    results: dict[str, dict[str, float]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    try:
        if "select" in only:
            for label, catalog in (("38", None), ("199", METATOOL)):
                for selector in ("default", "embedding", "bm25"):
                    argv = ["select", QUERY, "--json"]
                    if catalog is not None:
                        argv += ["--catalog", str(catalog)]
                    if selector != "default":
                        argv += ["--selector", selector]
                    key = f"select {label} tools, {selector}"
                    results[key] = _measure(lambda c, a=argv: _cli(args.src, c, a), args.repeat, tmp)
                    print(f"{key:<40} {results[key]}", flush=True)
        if "index" in only:
            index = tmp / "index"
            _cli(args.src, tmp / "cache-build", ["index", "build", "--docs", str(REPO / "docs"), "--path", str(index)])
            key = "index query (docs/)"
            results[key] = _measure(
                lambda c: _cli(args.src, c, ["index", "query", "--path", str(index), "how do I deploy"]),
                args.repeat,
                tmp,
            )
            print(f"{key:<40} {results[key]}", flush=True)
        if "serve" in only:
            key = "serve 199 tools, time to /readyz"
            results[key] = _measure(lambda c: _serve(args.src, c, METATOOL), args.repeat, tmp)
            print(f"{key:<40} {results[key]}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for label in ("38", "199"):
        hybrid = results.get(f"select {label} tools, default")
        bm25 = results.get(f"select {label} tools, bm25")
        if hybrid and bm25:
            ratio = hybrid["warm_s"] / bm25["warm_s"]
            print(f"select {label} tools: warm default / warm bm25 = {ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"src": str(args.src), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
