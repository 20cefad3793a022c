"""Runtime overhead per turn: everything but the model call, on a realistic pack.

500 host tools, 50 skills, a 1,000-document corpus, a memory store and a 200-message
history (reduced to a budget each turn), with the embedded default selector. The model
answers at once, so what is timed is narrowing (tools and skills), grounding, reduction
and request building. Run: ``python bench/bench_runtime.py [--turns 200] [--tools 500]
[--format openai|anthropic|openai-responses] [--json]``. Under Anthropic and the Responses API the
``deferred`` offer sends every other catalog tool as a deferred definition with each request, so
their turns grow with the catalog (``--tools 10000``).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from shortlist.runtime import Conversation, Pack, Tool  # noqa: E402

VERBS = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "send",
    "book",
    "cancel",
    "convert",
    "track",
    "summarize",
    "translate",
    "export",
    "import",
]
NOUNS = [
    "invoice",
    "order",
    "customer",
    "ticket",
    "flight",
    "hotel",
    "weather",
    "stock",
    "email",
    "calendar",
    "meeting",
    "file",
    "folder",
    "repository",
    "issue",
    "playlist",
    "recipe",
    "restaurant",
    "package",
    "shipment",
    "payment",
    "refund",
    "report",
    "dashboard",
    "metric",
    "alert",
    "server",
    "container",
    "database",
    "table",
    "backup",
    "user",
    "account",
    "password",
    "subscription",
    "coupon",
    "review",
    "photo",
    "video",
    "podcast",
    "article",
]
DOMAINS = ["billing", "travel", "support", "devops", "media", "commerce", "analytics", "security", "social", "health"]


def make_tools(rng: random.Random, n: int) -> list[Tool]:
    tools = []
    for i in range(n):
        verb, noun, noun2, dom = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(NOUNS), rng.choice(DOMAINS)
        tools.append(
            Tool(
                name=f"{dom}_{verb}_{noun}_{i}",
                description=f"{verb.capitalize()} a {noun} in the {dom} system, with its {noun2} details.",
                func=lambda **kw: "ok",
                parameters={"type": "object", "properties": {noun: {"type": "string"}, noun2: {"type": "string"}}},
            )
        )
    return tools


def make_skills(root: Path, rng: random.Random, n: int) -> Path:
    for i in range(n):
        d = root / f"skill-{i}"
        d.mkdir(parents=True)
        noun, dom = rng.choice(NOUNS), rng.choice(DOMAINS)
        d.joinpath("SKILL.md").write_text(
            f"---\nname: skill-{i}\ndescription: Procedures for {noun} work in {dom}\n---\nSteps for {noun}.\n"
        )
    return root


def make_history(rng: random.Random, n: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    i = 0
    while len(history) < n:
        noun = rng.choice(NOUNS)
        history.append({"role": "user", "content": f"Please check the {noun} status for case {i}."})
        fn = {"name": f"lookup_{noun}", "arguments": json.dumps({"id": i})}
        history.append(
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": fn}]}
        )
        history.append(
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"{noun} {i}: " + " ".join(rng.choices(NOUNS, k=120))}
        )
        history.append({"role": "assistant", "content": f"The {noun} for case {i} looks fine."})
        i += 1
    return history[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--tools", type=int, default=500)
    ap.add_argument("--skills", type=int, default=50)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--history", type=int, default=200)
    ap.add_argument("--selector", default=None, help="tool/skill selector (default: the built-in default)")
    ap.add_argument("--format", default="openai", choices=("openai", "anthropic", "openai-responses"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(7)

    from shortlist.memory import InMemoryStore, Memory
    from shortlist.retrieval import CorpusRetriever, Document

    docs = [
        Document(
            id=f"doc{i}",
            title=f"{rng.choice(NOUNS)} guide {i}",
            text=" ".join(rng.choices(NOUNS + VERBS + DOMAINS, k=60)),
        )
        for i in range(args.docs)
    ]
    store = InMemoryStore()
    scope = {"user_id": "bench"}
    for i in range(50):
        store.save(Memory(type="preference", content=f"prefers {rng.choice(NOUNS)} reports {i}", scope=scope))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        corpus = CorpusRetriever(docs)
        pack = Pack(
            system_prompt="You are a support agent.\n{{memory_context}}\n{{grounding}}",
            tools=make_tools(rng, args.tools),
            skills=[make_skills(Path(tmp), rng, args.skills)],
            corpus=corpus,
            memory=store,
            scope=scope,
        )
        history = make_history(rng, args.history)

        def model(req: dict[str, Any]) -> dict[str, Any]:
            if args.format == "anthropic":
                return {"content": [{"type": "text", "text": "ok"}]}
            if args.format == "openai-responses":
                return {"output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}]}
            return {"role": "assistant", "content": "ok"}

        from shortlist.selection._facade import DEFAULT

        sel = args.selector or DEFAULT
        conv = Conversation(
            pack, model=model, format=args.format, tool_selector=sel, skills_selector=sel, max_tokens=20_000, k=5
        )
        conv.history = list(history)
        conv.send("warm up: build the indexes")
        setup_s = time.perf_counter() - t0
        overhead: list[float] = []
        steps: dict[str, list[float]] = {}
        for _ in range(args.turns):
            conv.history = list(history)
            q = f"{rng.choice(VERBS)} the {rng.choice(NOUNS)} for my {rng.choice(DOMAINS)} {rng.choice(NOUNS)}"
            r = conv.send(q)
            overhead.append(r.report.timings_ms["overhead"])
            for k, v in r.report.timings_ms.items():
                steps.setdefault(k, []).append(v)

    def pct(xs: list[float], p: float) -> float:
        return round(statistics.quantiles(xs, n=100)[int(p) - 1], 3) if len(xs) > 1 else xs[0]

    out = {
        "turns": args.turns,
        "setup_s": round(setup_s, 2),
        "overhead_ms": {"p50": pct(overhead, 50), "p99": pct(overhead, 99)},
        "steps_p50_ms": {k: pct(v, 50) for k, v in steps.items()},
        "config": {k: getattr(args, k) for k in ("tools", "skills", "docs", "history", "selector", "format")},
    }
    if args.json:
        sys.stdout.write(json.dumps(out) + "\n")
    else:
        sys.stdout.write(f"runtime overhead per turn over {args.turns} turns (setup {out['setup_s']} s)\n")
        sys.stdout.write(f"  p50 {out['overhead_ms']['p50']} ms   p99 {out['overhead_ms']['p99']} ms\n")
        for k, v in out["steps_p50_ms"].items():
            sys.stdout.write(f"  {k:<14} p50 {v} ms\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
