"""Tool-definition tokens per turn with and without narrowing, and Recall@5, on live MCP servers.

Starts the real PyPI servers ``mcp-server-time``, ``mcp-server-git`` (on a temporary repository)
and ``mcp-server-fetch`` (listed only, never called) over stdio, lists their tools as
``mcp__<server>__<tool>`` candidates, and for each question of ``bench/data/mcp_questions.jsonl``
narrows them (k=5, MCP unpinned: :func:`shortlist.mcp.mcp_policy`) with several selectors.

Tokens are counted with tiktoken ``cl100k_base`` (offline, :class:`shortlist._tokens.TiktokenCounter`)
on the JSON of the OpenAI tool definitions the turn would send. Recall@5 is measured on what
surfaces (a fallback surfaces everything, so it counts its tokens too).

Two catalogs: the MCP tools alone, and the MCP tools plus the bundled example catalog of 38
non-MCP tools (a pack with its own tools next to its MCP servers; the gold is MCP only).

    python bench/bench_mcp_tokens.py [--selectors lexical,bm25,hybrid] [--k 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from shortlist._tokens import TiktokenCounter
from shortlist._types import Candidate, Query
from shortlist.adapters._catalog import load_catalog
from shortlist.adapters._tools import to_openai_tool
from shortlist.mcp import MCPToolSource
from shortlist.mcp._client import parse_server_arg
from shortlist.mcp._tools import mcp_policy
from shortlist.rankers._registry import create_builtin_selector
from shortlist.selection._narrowing import narrow

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "data" / "mcp_questions.jsonl"
BIN = Path(sys.executable).parent


def tool_tokens(counter: TiktokenCounter, tools: list[Candidate]) -> int:
    return counter.count(json.dumps([to_openai_tool(c) for c in tools], ensure_ascii=False))


def run(catalog: list[Candidate], questions: list[dict[str, Any]], selectors: list[str], k: int) -> dict[str, Any]:
    counter = TiktokenCounter("cl100k_base")
    full = tool_tokens(counter, catalog)
    out: dict[str, Any] = {"tools": len(catalog), "tokens_without_narrowing": full, "selectors": {}}
    for name in selectors:
        selector = create_builtin_selector(name)
        tokens, recalls, fallbacks = [], [], 0
        for q in questions:
            turn = narrow(selector, Query(text=q["query"], kind="tool", k=k), catalog, mcp_policy())
            fallbacks += turn.fallback is not None
            surfaced = list(turn.surfaced)
            tokens.append(tool_tokens(counter, surfaced))
            top = set(turn.ids[:k]) if turn.fallback is None else set(turn.ids)
            recalls.append(len(top & set(q["gold"])) / len(q["gold"]))
        out["selectors"][name] = {
            "tokens_mean": round(statistics.mean(tokens), 1),
            "tokens_max": max(tokens),
            "reduction": round(1 - statistics.mean(tokens) / full, 3),
            "recall_at_k": round(statistics.mean(recalls), 3),
            "fallbacks": fallbacks,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--selectors", default="lexical,bm25,hybrid")
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("shortlist").setLevel(logging.ERROR)  # fallbacks are counted in the report
    questions = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["git", "init", "-q", tmp], check=True)
        specs = [
            parse_server_arg(f"time={BIN / 'mcp-server-time'} --local-timezone UTC"),
            parse_server_arg(f"git={BIN / 'mcp-server-git'} --repository {tmp}"),
            parse_server_arg(f"fetch={BIN / 'mcp-server-fetch'}"),
        ]
        with MCPToolSource(specs) as source:
            mcp_tools = source.list_candidates()
    with resources.as_file(resources.files("shortlist.data") / "example_tools.json") as path:
        bundled = load_catalog(path)
    selectors = [s for s in args.selectors.split(",") if s]
    report = {
        "questions": len(questions),
        "k": args.k,
        "counter": "tiktoken:cl100k_base (offline)",
        "mcp_only": run(mcp_tools, questions, selectors, args.k),
        "mcp_plus_bundled_catalog": run([*mcp_tools, *bundled], questions, selectors, args.k),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
