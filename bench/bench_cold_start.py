"""Cold and warm wall time of the CLI and the service, each in a fresh process.

"Cold" is the first process with an empty cache directory (``SHORTLIST_CACHE_DIR`` pointing at a
new temporary folder: nothing embedded yet); "warm" is the next processes, sharing that folder.
Measured: ``shortlist select`` on the bundled 38-tool catalog and on MetaTool's 199 tools
(``../shared/data/metatool/tools.jsonl`` relative to the repository) with the default selector,
``--selector embedding`` and ``--selector bm25``; ``shortlist index query`` on an index of the
repository's ``docs/``; and ``shortlist serve``'s time until ``/readyz`` answers 200.

Every figure is the median of ``--repeat`` rounds; a round runs every command once cold (a new
cache folder) and once warm, one command after the other, so a ratio compares runs made at the
same time. Each figure has its wall time and its CPU time (user + system of the process, less
sensitive to what else the machine runs). The machine is noisy: compare ratios within one run
(``warm / bm25``), not absolute times across runs.

    OMP_NUM_THREADS=1 python bench/bench_cold_start.py [--repeat 3] [--json OUT] [--only select]

To measure another checkout with the same venv (the "before" figures), point ``--src`` at its
``src`` folder: ``python bench/bench_cold_start.py --src /tmp/before/src``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cli(src: Path, cache: Path, args: list[str]) -> tuple[float, float]:
    cpu = _cpu()
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
    return elapsed, _cpu() - cpu


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(src: Path, cache: Path, catalog: Path) -> tuple[float, float]:
    port = _free_port()
    cpu = _cpu()
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
                        ready = time.perf_counter() - start
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        else:
            raise SystemExit("serve not ready within 300 s")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return ready, _cpu() - cpu  # CPU: start-up plus shutdown, of the process (not its threads' idle time)


def _summary(runs: list[tuple[str, float, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for phase in ("cold", "warm"):
        walls = [w for p, w, _ in runs if p == phase]
        cpus = [c for p, _, c in runs if p == phase]
        if walls:
            out[f"{phase}_s"] = round(statistics.median(walls), 3)
            out[f"{phase}_cpu_s"] = round(statistics.median(cpus), 3)
    return out


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
    tmp = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    commands: dict[str, Any] = {}
    if "select" in only:
        for label, catalog in (("38", None), ("199", METATOOL)):
            for selector in ("default", "embedding", "bm25"):
                argv = ["select", QUERY, "--json"]
                if catalog is not None:
                    argv += ["--catalog", str(catalog)]
                if selector != "default":
                    argv += ["--selector", selector]
                commands[f"select {label} tools, {selector}"] = lambda c, a=argv: _cli(args.src, c, a)
    index = tmp / "index"
    if "index" in only:
        commands["index query (docs/)"] = lambda c: _cli(
            args.src, c, ["index", "query", "--path", str(index), "how do I deploy"]
        )
    if "serve" in only:
        commands["serve 199 tools, time to /readyz"] = lambda c: _serve(args.src, c, METATOOL)
    runs: dict[str, list[tuple[str, float, float]]] = {key: [] for key in commands}
    try:
        if "index" in only:
            _cli(args.src, tmp / "cache-build", ["index", "build", "--docs", str(REPO / "docs"), "--path", str(index)])
        for round_ in range(args.repeat):
            for key, run in commands.items():
                cache = tmp / f"cache-{round_}-{list(commands).index(key)}"  # its own: a cold run is cold
                runs[key].append(("cold", *run(cache)))
                runs[key].append(("warm", *run(cache)))
                print(
                    f"round {round_ + 1}: {key:<36} cold {runs[key][-2][1]:.2f} s, warm {runs[key][-1][1]:.2f} s",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = {key: _summary(r) for key, r in runs.items()}
    for key, figures in results.items():
        print(f"{key:<40} {figures}")
    for label in ("38", "199"):
        hybrid = results.get(f"select {label} tools, default")
        bm25 = results.get(f"select {label} tools, bm25")
        if hybrid and bm25:
            ratio = hybrid["warm_s"] / bm25["warm_s"]
            cpu_ratio = hybrid["warm_cpu_s"] / bm25["warm_cpu_s"]
            print(f"select {label} tools: warm default / warm bm25 = {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU")
    if args.json:
        args.json.write_text(json.dumps({"src": str(args.src), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
