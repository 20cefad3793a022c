"""Does every part of the context stay under the provider's cached prefix? (issue 28)

Conversations through the public runtime (``shortlist.runtime.Conversation``) with a callable
model that records every request; each request is compared with the previous one *here*,
independently of the runtime's own ``TurnReport.prefix``: the tools array and the system prompt
must be byte-identical, and the messages must extend the previous request's (Anthropic's
``cache_control`` marker moves to the newest block every request and is not compared).

1. **grounding** (each format: anthropic, openai, openai-responses): a 30-tool catalog, a
   five-document corpus and a profile memory; five turns, each about another document.
   Reported: distinct tools arrays and system prompts, requests whose messages do not extend
   the previous request's, turns whose relevant document reached the model, cached-prefix
   breaks.
2. **reduction** (each format): 30 long turns (about 360 tokens each: a question, every third
   turn a tool call and its result, a long answer) under a 6,000-token history budget.
   Reported: requests that broke the cached prefix (and which part), reductions.
3. **needles**: 60-turn conversations (5 seeds, both formats) in which the user states three
   facts in the first turns, and the model three others in its first answers; after each
   reduction, is each fact still in the request? Reported: the share of facts still there after
   the 1st, 2nd and 3rd reduction, and in the last request. (An older runtime "reduces" on
   every turn once over budget, a small trim each time, so its "after 3 reductions" is three
   turns after the budget was first passed: compare the last-request shares.)

Run: ``python bench/bench_prefix.py [--json] [--turns 30] [--budget 6000]``. It runs against
whatever ``shortlist`` is importable, so the same script measures an older checkout
(``PYTHONPATH=/path/to/old/src``); options an older runtime lacks are left out.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from shortlist.memory import InMemoryStore, Memory  # noqa: E402
from shortlist.retrieval import CorpusRetriever, Document  # noqa: E402
from shortlist.runtime import Conversation, Pack, Tool  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared replaying model
from _replay import answer, callable_tools  # noqa: E402

VERBS = ["get", "list", "create", "update", "delete", "search"]
NOUNS = ["invoice", "order", "customer", "ticket", "flight", "hotel", "weather", "stock", "email", "calendar"]
_PROSE = (
    "the team reviewed each option carefully before settling on a plan that balanced cost speed and risk "
    "while keeping every stakeholder informed about progress milestones budgets schedules dependencies "
    "vendors contracts reviews approvals audits metrics dashboards incidents releases migrations backups"
)
FILLER = _PROSE.split(" ")

#: Five documents, each with a phrase only it contains (what "reached the model" looks for).
DOCUMENTS = [
    ("refunds", "Refund policy", "Refunds are issued within 14 days of purchase to the original card.", "14 days"),
    ("shipping", "Shipping times", "Standard shipping takes 5 business days; express shipping takes 2.", "5 business"),
    ("warranty", "Warranty terms", "The warranty covers manufacturing defects for 24 months.", "24 months"),
    (
        "passwords",
        "Password reset",
        "Reset a password from the login page; the reset link expires in 30 minutes.",
        "30 minutes",
    ),
    (
        "invoices",
        "Invoice copies",
        "Invoice copies are emailed as PDF files from the billing portal.",
        "billing portal",
    ),
]
QUESTIONS = [
    "How many days until refunds are issued after a purchase?",
    "How long does standard shipping take, in business days?",
    "What does the warranty cover, and for how many months?",
    "How do I reset my password, and when does the reset link expire?",
    "Where do I get invoice copies, as PDF files?",
]
#: Words of a long answer (a turn is then about 360 tokens with its question).
ANSWER_WORDS = 300
#: Facts the user states in the first three turns ...
NEEDLES = ["My locker code is {n}.", "Our project codename is Falcon{n}.", "The server rack number is R{n}."]
#: ... and facts the model states in its first three answers.
MODEL_NEEDLES = ["Your ticket number is T{n}.", "The order ships from depot D{n}.", "Your booking reference is B{n}."]


def _tools() -> list[Tool]:
    def make(name: str, noun: str) -> Tool:
        def run(**kwargs: Any) -> str:
            return f"{name} done: " + " ".join(FILLER[:40])

        return Tool(
            name=name,
            description=f"{name.split('_')[0].capitalize()} {noun} records in the {noun} system.",
            func=run,
            parameters={"type": "object", "properties": {"id": {"type": "string"}}},
        )

    return [make(f"{v}_{n}", n) for n in NOUNS[:5] for v in VERBS]  # 30 tools


def _accepts(name: str) -> bool:
    return name in inspect.signature(Conversation.__init__).parameters


def _conversation(pack: Pack, fmt: str, model: Callable[[dict[str, Any]], dict[str, Any]], **options: Any) -> Any:
    kept = {k: v for k, v in options.items() if _accepts(k)}
    return Conversation(pack, model=model, format=fmt, tool_selector="bm25", k=5, **kept)  # type: ignore[arg-type]


# -- the independent check --------------------------------------------------------------------
def _strip(message: Any) -> Any:
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return message
    return {**message, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in content]}


def _parts(request: Mapping[str, Any], fmt: str) -> tuple[str, str, list[str]]:
    messages = list(request["input"] if fmt == "openai-responses" else request["messages"])
    if fmt == "anthropic":
        system: Any = request.get("system")
    else:
        system, messages = messages[0], messages[1:]
    return _dump(request.get("tools")), _dump(system), [_dump(_strip(m)) for m in messages]


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def prefix_breaks(requests: Sequence[Mapping[str, Any]], fmt: str) -> list[tuple[int, str]]:
    """``(request index, part)`` of every request that does not extend the previous one."""
    out: list[tuple[int, str]] = []
    for i in range(1, len(requests)):
        (t0, s0, m0), (t1, s1, m1) = _parts(requests[i - 1], fmt), _parts(requests[i], fmt)
        if t0 != t1:
            out.append((i, "tools"))
        elif s0 != s1:
            out.append((i, "system"))
        elif m1[: len(m0)] != m0:
            out.append((i, "history"))
    return out


def _turn_start(request: Mapping[str, Any], fmt: str) -> bool:
    """The request opens a turn: its last message is the user's, or the runtime's prefetched search."""
    if fmt == "openai-responses":
        item = request["input"][-1]
        if item.get("type") == "tool_search_output":
            return str(item.get("call_id", "")).startswith("prefetch")
        return bool(item.get("type") == "message" and item.get("role") == "user")
    last = request["messages"][-1]
    if fmt == "anthropic":
        results = [b for b in last["content"] if b.get("type") == "tool_result"]
        return last["role"] == "user" and (not results or str(results[0].get("tool_use_id")).startswith("prefetch"))
    if last["role"] == "tool":
        return str(last.get("tool_call_id", "")).startswith("prefetch")
    return bool(last["role"] == "user")


# -- 1. grounding ---------------------------------------------------------------------------------
def grounding(fmt: str) -> dict[str, Any]:
    requests: list[dict[str, Any]] = []

    def model(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(json.loads(json.dumps(req)))
        host = callable_tools(req, fmt)
        if len(requests) == 3 and host and _turn_start(req, fmt):  # one turn calls a tool
            return answer(fmt, "", (host[0], f"call{len(requests)}"), req)
        return answer(fmt, "Here is what the documents say.")

    store = InMemoryStore()
    scope = {"user_id": "bench"}
    store.save(
        Memory(
            type="preference",
            content="prefers short answers",
            scope=scope,
            metadata={"consent_category": "memory:preferences"},
        )
    )
    pack = Pack(
        system_prompt="You are a support agent.\n{{memory_context}}\n{{grounding}}",
        tools=_tools(),
        corpus=CorpusRetriever([Document(id=i, title=t, text=x) for i, t, x, _ in DOCUMENTS], scoring="lexical"),
        memory=store,
        scope=scope,
    )
    conv = _conversation(pack, fmt, model)
    firsts: list[int] = []
    reports = []
    try:
        for q in QUESTIONS:
            firsts.append(len(requests))
            reports.append(conv.send(q).report)
    finally:
        conv.close()
    reached = 0
    for turn, start in enumerate(firsts):
        if DOCUMENTS[turn][3] in json.dumps(requests[start]):
            reached += 1
    breaks = prefix_breaks(requests, fmt)
    parts = [_parts(r, fmt) for r in requests]
    return {
        "format": fmt,
        "requests": len(requests),
        "distinct_tools_arrays": len({p[0] for p in parts}),
        "distinct_system_prompts": len({p[1] for p in parts}),
        "not_append_only": sum(1 for _, part in breaks if part == "history"),
        "grounding_reached": f"{reached}/{len(QUESTIONS)}",
        "prefix_breaks": len(breaks),
        "break_parts": [part for _, part in breaks],
        "runtime_reported_breaks": sum(len(getattr(r, "prefix_breaks", [])) for r in reports),
    }


# -- 2 and 3. long conversations under a budget ---------------------------------------------------
def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(n))


def long_conversation(fmt: str, turns: int, budget: int, seed: int, needles: bool) -> dict[str, Any]:
    rng = random.Random(seed)
    requests: list[dict[str, Any]] = []
    facts = [text.format(n=rng.randint(1000, 9999)) for text in NEEDLES] if needles else []
    said = [text.format(n=rng.randint(1000, 9999)) for text in MODEL_NEEDLES] if needles else []
    turn = [0]

    def model(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(json.loads(json.dumps(req)))
        host = callable_tools(req, fmt)
        if len(requests) % 4 == 1 and host and _turn_start(req, fmt):  # about every third turn
            return answer(fmt, "", (host[0], f"c{len(requests)}"), req)
        fact = said[turn[0]] + " " if turn[0] < len(said) else ""
        return answer(fmt, f"Answer: {fact}" + _words(rng, ANSWER_WORDS))

    conv = _conversation(Pack(tools=_tools()), fmt, model, max_tokens=budget)
    reports = []
    try:
        for t in range(turns):
            question = f"Question {t}: {rng.choice(VERBS)} the {rng.choice(NOUNS)} about {_words(rng, 25)}?"
            if t < len(facts):
                question = f"{facts[t]} {question}"
            turn[0] = t
            reports.append(conv.send(question).report)
    finally:
        conv.close()
    breaks = prefix_breaks(requests, fmt)
    out: dict[str, Any] = {
        "format": fmt,
        "requests": len(requests),
        "prefix_breaks": len(breaks),
        "break_parts": sorted({part for _, part in breaks}),
        "runtime_reported_breaks": sum(len(getattr(r, "prefix_breaks", [])) for r in reports),
        "runtime_reasons": [f"{b['part']}:{b['reason']}" for r in reports for b in getattr(r, "prefix_breaks", [])],
        "runtime_reductions": sum(1 for r in reports if (r.reduction or {}).get("reduced")),
    }
    if facts:
        # after the k-th history break (a reduction), is each fact still in the request?
        history_breaks = [i for i, part in breaks if part == "history"]
        out["user_kept"] = [facts_kept(requests[i], facts) for i in history_breaks[:3]]
        out["model_kept"] = [facts_kept(requests[i], said) for i in history_breaks[:3]]
        out["user_kept_at_end"] = facts_kept(requests[-1], facts)
        out["model_kept_at_end"] = facts_kept(requests[-1], said)
        out["facts"] = len(facts)
    return out


def facts_kept(request: Mapping[str, Any], facts: Sequence[str]) -> int:
    text = json.dumps(request)
    return sum(1 for f in facts if f in text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--budget", type=int, default=6000)
    ap.add_argument("--needle-turns", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    result: dict[str, Any] = {"grounding": [], "reduction": [], "needles": {}}
    formats = [
        f for f in ("anthropic", "openai", "openai-responses") if f != "openai-responses" or _accepts("tool_loading")
    ]
    for fmt in formats:
        result["grounding"].append(grounding(fmt))
        result["reduction"].append(long_conversation(fmt, args.turns, args.budget, seed=1, needles=False))
    kept = {"user": [0, 0, 0], "model": [0, 0, 0]}
    reached = [0, 0, 0]
    at_end = {"user": 0, "model": 0}
    runs = 0
    for seed in range(args.seeds):
        for fmt in ("anthropic", "openai"):
            run = long_conversation(fmt, args.needle_turns, args.budget, seed=100 + seed, needles=True)
            for k, (user, model) in enumerate(zip(run["user_kept"], run["model_kept"], strict=True)):
                kept["user"][k] += user
                kept["model"][k] += model
                reached[k] += run["facts"]
            at_end["user"] += run["user_kept_at_end"]
            at_end["model"] += run["model_kept_at_end"]
            runs += run["facts"]
    for who, counts in kept.items():
        result["needles"][f"stated_by_{who}"] = [
            round(c / r, 3) if r else None for c, r in zip(counts, reached, strict=True)
        ]
        result["needles"][f"stated_by_{who}_at_turn_{args.needle_turns}"] = round(at_end[who] / runs, 3)
    result["needles"]["facts_per_reduction"] = reached
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print("1. grounding (5 turns, 30 tools, 5-document corpus, a profile memory)")
    for g in result["grounding"]:
        print(
            f"  {g['format']:9} requests {g['requests']:2}  tools arrays {g['distinct_tools_arrays']}  "
            f"system prompts {g['distinct_system_prompts']}  not append-only {g['not_append_only']}  "
            f"grounding reached {g['grounding_reached']}  prefix breaks {g['prefix_breaks']} {g['break_parts']}"
        )
    print(f"2. reduction ({args.turns} long turns, history budget {args.budget} tokens)")
    for r in result["reduction"]:
        print(
            f"  {r['format']:9} requests {r['requests']:2}  prefix breaks {r['prefix_breaks']} {r['break_parts']}  "
            f"(runtime says {r['runtime_reported_breaks']} {r['runtime_reasons']}, "
            f"reductions {r['runtime_reductions']})"
        )
    print(
        f"3. needles ({args.needle_turns} turns x {args.seeds} seeds x 2 formats, 3 facts stated in the first "
        "turns): share still in the request after the 1st, 2nd, 3rd reduction"
    )
    for k, v in result["needles"].items():
        print(f"  {k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
