"""What the framework integrations cost and save: per-call overhead and tool tokens per model call.

For each framework (LangChain v1 ``create_agent``, PydanticAI, the OpenAI Agents SDK, LlamaIndex
``FunctionAgent``), the 199 MetaTool tools become that framework's own tools (each with one
``query: string`` parameter) and the same queries are run, interleaved, through two agents in one
process: one with every tool (no narrowing) and one with the shortlist adapter. The model is the
framework's own test double answering at once, so a run is one model call and what is timed is
the framework plus, for the second agent, the adapter (selection included: every query is new,
so nothing is served from the per-turn cache).

Reported per framework: p50/p99 of one agent run without and with the adapter, the overhead at
p50 and p99, and the tool-definition tokens the model received per call (the JSON definition of
each tool, ``len / 4``, as ``shortlist eval`` counts them) with and without narrowing.

Then, per conversation and per offer policy (``per_turn``, ``stable``, and every tool with no
narrowing): multi-turn conversations whose user messages are consecutive MetaTool queries (a
~1,000-token system prompt; each turn adds its message and ~300 tokens of answer and tool
results), decided by the same :class:`ToolNarrower` the adapters call (the adapters hand it the
conversation they see: the framework tests prove they do). A call whose tools differ from the
previous call's re-writes the tools block and everything behind it: reported are the
tool-definition tokens re-billed uncached per conversation, and the prompt's input cost per
conversation (tools + history, cache writes and reads at :class:`~shortlist.offer.Prices`,
in base-input-token units). No model searches here (``find_tools`` rounds are not simulated).

Run::

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_frameworks.py                   # hybrid (the default)
    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_frameworks.py --selector bm25 --json
    SHORTLIST_CACHE_DIR=off ...   # hybrid: embed every query (no persistent embedding cache hit)
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from shortlist._tokens import definition_tokens  # noqa: E402
from shortlist._types import Candidate  # noqa: E402
from shortlist.integrations._core import ToolNarrower, TurnLog, tool_candidate  # noqa: E402
from shortlist.offer import Prices  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "metatool"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integrations"))  # langchain_fakes
PARAMS = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "the request"}},
    "required": ["query"],
}


def load(limit: int) -> tuple[list[Candidate], list[str]]:
    tools = [json.loads(line) for line in (DATA / "tools.jsonl").read_text().splitlines() if line.strip()]
    cands = [tool_candidate(t["id"], t.get("description", ""), PARAMS) for t in tools]
    queries = [json.loads(line)["text"] for line in (DATA / "queries.jsonl").read_text().splitlines() if line.strip()]
    return cands, list(dict.fromkeys(queries))[:limit]


Run = Callable[[str], Awaitable[list[str]]]  # one agent run for a query -> the tool names the model received


def langchain_runs(cands: list[Candidate], narrower: ToolNarrower) -> tuple[Run, Run]:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import StructuredTool
    from langchain_fakes import RecordingModel

    from shortlist.integrations.langchain import ShortlistMiddleware

    def forever() -> Any:
        while True:
            yield AIMessage(content="ok")

    tools = [
        StructuredTool.from_function(func=lambda query: "ok", name=c.id, description=c.description, args_schema=PARAMS)
        for c in cands
    ]

    def make(middleware: list[Any]) -> Run:
        model = RecordingModel(messages=forever())
        agent = create_agent(model, tools=tools, middleware=middleware)

        async def run(query: str) -> list[str]:
            await agent.ainvoke({"messages": [HumanMessage(query)]})
            return model.seen[-1]

        return run

    return make([]), make([ShortlistMiddleware(narrower)])


def pydantic_ai_runs(cands: list[Candidate], narrower: ToolNarrower) -> tuple[Run, Run]:
    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from shortlist.integrations.pydantic_ai import ShortlistTools

    tools = [
        Tool.from_schema(lambda query: "ok", name=c.id, description=c.description, json_schema=PARAMS) for c in cands
    ]

    def make(capabilities: list[Any]) -> Run:
        seen: list[list[str]] = []

        def answer(messages: Any, info: AgentInfo) -> ModelResponse:
            seen.append([t.name for t in info.function_tools])
            return ModelResponse(parts=[TextPart("ok")])

        agent = Agent(FunctionModel(answer), tools=tools, capabilities=capabilities)

        async def run(query: str) -> list[str]:
            await agent.run(query)
            return seen[-1]

        return run

    return make([]), make([ShortlistTools(narrower)])


def openai_agents_runs(cands: list[Candidate], narrower: ToolNarrower) -> tuple[Run, Run]:
    from agents import Agent, FunctionTool, Runner, Usage, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    from shortlist.integrations.openai_agents import ShortlistModel

    set_tracing_disabled(True)

    class Answer(Model):
        def __init__(self) -> None:
            self.seen: list[list[str]] = []

        async def get_response(
            self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *a: Any, **k: Any
        ) -> Any:
            self.seen.append([t.name for t in tools])
            text = ResponseOutputText(type="output_text", text="ok", annotations=[])
            msg = ResponseOutputMessage(type="message", id="m", role="assistant", status="completed", content=[text])
            return ModelResponse(output=[msg], usage=Usage(), response_id=None)

        def stream_response(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError

    async def invoke(_ctx: Any, _args: str) -> str:
        return "ok"

    tools = [
        FunctionTool(
            name=c.id,
            description=c.description,
            params_json_schema=PARAMS,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )
        for c in cands
    ]

    def make(narrowed: bool) -> Run:
        inner = Answer()
        if narrowed:
            model: Any = ShortlistModel(inner, narrower)
            agent = Agent(name="bench", model=model, tools=[*tools, model.find_tools])
        else:
            agent = Agent(name="bench", model=inner, tools=tools)

        async def run(query: str) -> list[str]:
            await Runner.run(agent, query)
            return inner.seen[-1]

        return run

    return make(False), make(True)


def llamaindex_runs(cands: list[Candidate], narrower: ToolNarrower) -> tuple[Run, Run]:
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # pydantic deprecations from llama-index-workflows
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool, ToolMetadata

    from shortlist.integrations.llamaindex import ShortlistToolRetriever

    tools = [FunctionTool(lambda query: "ok", ToolMetadata(name=c.id, description=c.description)) for c in cands]

    def make(narrowed: bool) -> Run:
        seen: list[list[str]] = []

        def answer(messages: Any, **kwargs: Any) -> ChatMessage:
            seen.append([t.metadata.name for t in kwargs.get("tools") or []])
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[TextBlock(text="ok")])

        llm = MockFunctionCallingLLM(response_generator=answer)
        retriever = ShortlistToolRetriever(tools, narrower)
        agent = (
            FunctionAgent(llm=llm, tool_retriever=retriever, streaming=False)
            if narrowed
            else FunctionAgent(llm=llm, tools=tools, streaming=False)
        )

        async def run(query: str) -> list[str]:
            retriever.reset()  # each query is a new conversation (the retriever remembers one)
            await agent.run(user_msg=query)
            return seen[-1]

        return run

    return make(False), make(True)


FRAMEWORKS: dict[str, Callable[[list[Candidate], ToolNarrower], tuple[Run, Run]]] = {
    "langchain": langchain_runs,
    "pydantic-ai": pydantic_ai_runs,
    "openai-agents": openai_agents_runs,
    "llamaindex": llamaindex_runs,
}


async def measure(name: str, cands: list[Candidate], queries: list[str], selector: str, k: int) -> dict[str, Any]:
    selector_ms: list[float] = []

    def timing(event: Any) -> None:  # the selector's own time per turn: the rest of the overhead is the adapter's glue
        if event.name in ("selection.made", "selection.fallback") and getattr(event, "kind", "") == "tool":
            selector_ms.append(float(event.latency_ms))

    narrower = ToolNarrower(selector=selector, k=k, on_event=timing)
    plain, narrowed = FRAMEWORKS[name](cands, narrower)
    by_name = {c.id: c for c in cands}
    tokens = {n: definition_tokens(c) for n, c in by_name.items()}
    from shortlist.integrations._core import SEARCH_TOOL_DESCRIPTION, SEARCH_TOOL_NAME, SEARCH_TOOL_PARAMETERS

    tokens[SEARCH_TOOL_NAME] = definition_tokens(
        Candidate(SEARCH_TOOL_NAME, description=SEARCH_TOOL_DESCRIPTION, parameters=SEARCH_TOOL_PARAMETERS)
    )
    for q in queries[:5]:  # warm both paths (imports, the selector's index, the framework's caches)
        await plain("warm up " + q)
        await narrowed("warm up " + q)
    selector_ms.clear()
    times: dict[str, list[float]] = {"plain": [], "narrowed": []}
    toks: dict[str, list[int]] = {"plain": [], "narrowed": []}
    for q in queries:
        for label, run in (("plain", plain), ("narrowed", narrowed)):
            start = time.perf_counter()
            seen = await run(q)
            times[label].append((time.perf_counter() - start) * 1000)
            toks[label].append(sum(tokens.get(n, 0) for n in seen))
    p = {label: (float(np.percentile(v, 50)), float(np.percentile(v, 99))) for label, v in times.items()}
    return {
        "framework": name,
        "calls": len(queries),
        "plain_ms": {"p50": round(p["plain"][0], 2), "p99": round(p["plain"][1], 2)},
        "narrowed_ms": {"p50": round(p["narrowed"][0], 2), "p99": round(p["narrowed"][1], 2)},
        "overhead_ms": {
            "p50": round(p["narrowed"][0] - p["plain"][0], 2),
            "p99": round(p["narrowed"][1] - p["plain"][1], 2),
        },
        "selector_ms": {
            "p50": round(float(np.percentile(selector_ms, 50)), 2),
            "p99": round(float(np.percentile(selector_ms, 99)), 2),
        },
        "tool_tokens_per_call": {
            "plain": round(float(np.mean(toks["plain"]))),
            "narrowed": round(float(np.mean(toks["narrowed"]))),
        },
    }


SYSTEM = "You are the assistant of a large tool catalog; pick the right tool and answer briefly. " * 44
ANSWER = "An answer with the tool's result, as a model would write it after calling the tool. " * 14


def conversation_cost(
    cands: list[Candidate], queries: list[str], selector: str, k: int, turns: int, conversations: int
) -> list[dict[str, Any]]:
    """Tool tokens re-billed uncached and input cost per conversation, per offer policy (see the module docs)."""
    prices = Prices()
    catalog_key = ("bench", *(c.id for c in cands))
    tokens = {c.id: definition_tokens(c) for c in cands}
    convs = [queries[i * turns : (i + 1) * turns] for i in range(conversations)]
    convs = [c for c in convs if len(c) == turns]
    rows = []
    for policy in ("per_turn", "stable", "everything"):
        narrower = ToolNarrower(selector=selector, k=k, policy="stable" if policy == "everything" else policy)
        catalog = narrower.catalog(catalog_key, lambda: cands)
        rebilled: list[int] = []
        cost: list[float] = []
        changes: list[int] = []
        for texts in convs:
            conv = TurnLog().system(SYSTEM)
            previous: tuple[str, ...] | None = None
            prompt_before = 0
            out = {"rebilled": 0, "cost": 0.0, "changes": 0}
            for text in texts:
                conv.user(text)
                names = tuple(c.id for c in catalog) if policy == "everything" else narrower.choose(catalog, conv).names
                block = sum(tokens[n] for n in names)
                prompt = block + conv.chars // 4
                same = names == previous
                out["cost"] += prices.call(prompt, prompt_before if same else 0)
                if not same:
                    out["rebilled"] += block
                    out["changes"] += previous is not None
                previous, prompt_before = names, prompt
                conv.other(ANSWER)
            rebilled.append(int(out["rebilled"]))
            cost.append(float(out["cost"]))
            changes.append(int(out["changes"]))
        narrower.close()
        rows.append(
            {
                "policy": policy,
                "conversations": len(convs),
                "turns": turns,
                "tool_tokens_rebilled": round(float(np.mean(rebilled))),
                "tools_changes": round(float(np.mean(changes)), 2),
                "input_cost": round(float(np.mean(cost))),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--selector", default="hybrid")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--conversations", type=int, default=25, help="multi-turn conversations (0: skip)")
    parser.add_argument("--turns", type=int, default=8, help="user messages per conversation")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cands, queries = load(args.queries)
    frameworks = [n for n in args.frameworks.split(",") if n]
    rows = [asyncio.run(measure(n, cands, queries, args.selector, args.k)) for n in frameworks]
    conv_rows = (
        conversation_cost(cands, queries, args.selector, args.k, args.turns, args.conversations)
        if args.conversations
        else []
    )
    if args.json:
        out = {"selector": args.selector, "k": args.k, "tools": len(cands), "rows": rows, "conversations": conv_rows}
        print(json.dumps(out, indent=2))
        return
    print(f"{len(cands)} MetaTool tools, {len(queries)} queries, selector {args.selector}, k={args.k}")
    head = f"{'framework':<14} {'no narrowing p50/p99 ms':>24} {'with shortlist p50/p99 ms':>26}"
    print(f"{head} {'overhead p50/p99 ms':>20} {'of it selector p50/p99':>23} {'tool tokens/call':>18}")
    for r in rows:
        a, b, o, t = r["plain_ms"], r["narrowed_ms"], r["overhead_ms"], r["tool_tokens_per_call"]
        sel = r["selector_ms"]
        print(
            f"{r['framework']:<14} {a['p50']:>11.2f} / {a['p99']:<10.2f} {b['p50']:>12.2f} / {b['p99']:<11.2f}"
            f" {o['p50']:>8.2f} / {o['p99']:<9.2f} {sel['p50']:>10.2f} / {sel['p99']:<10.2f}"
            f" {t['plain']:>7} -> {t['narrowed']:<6}"
        )
    if conv_rows:
        c0 = conv_rows[0]
        print(f"\nper conversation ({c0['conversations']} conversations of {c0['turns']} user messages):")
        print(f"{'policy':<12} {'tools changes':>14} {'tool tokens re-billed uncached':>31} {'input cost':>11}")
        for c in conv_rows:
            print(f"{c['policy']:<12} {c['tools_changes']:>14} {c['tool_tokens_rebilled']:>31} {c['input_cost']:>11}")


if __name__ == "__main__":
    main()
