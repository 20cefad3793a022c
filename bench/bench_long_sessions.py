"""Long sessions: what reduction in rare large steps costs, and which facts it keeps (issue 28, parts 3 and 5).

**The development set** (:func:`generate`, deterministic: ``random.Random(seed)`` only): long
traces of ``--turns`` turns (default 60). Each turn is a user question (about 30 words of
prose), on every third turn a tool call whose result is about 120 words, and an answer of about
``--answer-words`` words (default 260): about 340 tokens a turn, so a 60-turn trace says about
20.5k tokens against a 6k-token history budget. Nine *needles*, each a distinct random id
(``L48213``, ``T90412``, ...): three stated by the user in turns 0-2, three by the model in its
answers of turns 0-2, three by tool results of turns 1, 4 and 7 (every third turn calls a tool).
Each needle is asked about later, at a turn drawn in the last third of the trace (``asked_at``);
the filler prose holds no digits, so an id cannot match by accident. ``--write DIR`` stores
the traces as ``DIR/traces.jsonl`` (one trace a line: ``cid``, ``turns`` with ``user``,
``answer`` and, when the turn calls a tool, ``tool_result``; ``needles`` with ``value``,
``stated_by``, ``turn``, ``asked_at``); the set is regenerated, not committed.

**The run.** Each trace is driven through the public runtime (``shortlist.runtime.Conversation``,
both formats) with a callable model that replays the trace and records every request, under a
history budget (``--budget``, default 6,000 tokens), in three settings:

* ``rare+facts`` (the runtime's default): reduce to the low-water mark (0.5 of the budget) when
  over it, keeping the facts of what is removed on the history's fact sheet;
* ``rare``: the same steps without the fact sheet (``keep_facts=False``);
* ``per_turn``: per-turn trimming, the old behaviour (``low_water=1.0``, no fact sheet): once
  over the budget, every turn trims a little and re-writes the prefix from the first message
  it touched (the relevance reducer, which keeps the user's messages);
* ``per_turn_newest``: per-turn trimming that keeps the newest messages that fit (a sliding
  window, LangChain's ``trim_messages(strategy="last")``): every trim re-writes nearly all the
  history.

**Cost**: every recorded request priced by the cache rules of a price preset
(``--prices``, default ``anthropic-5m``; ``shortlist.offer.PRICE_PRESETS``): the tokens
(the offline ``o200k_base`` counter) of the tools array, the system prompt and each message;
a request reads from the cache the longest prefix it shares with the previous request (tools
and system byte-identical, then whole messages equal, Anthropic's moving ``cache_control``
ignored) and writes the rest. Reported as base-price input tokens per trace and as a multiple
of ``per_turn``'s (target: <= 0.4x).

**Retention**: the share of the needles stated so far that are still in the request right after
the 1st, 2nd and 3rd reduction (target: >= 0.9 after 3), and the share present in the request
of the turn that asks about them.

Run: ``python bench/bench_long_sessions.py [--traces 5] [--turns 60] [--budget 6000]
[--low-water 0.5] [--prices anthropic-5m] [--formats anthropic,openai] [--json] [--write DIR]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
from collections.abc import Mapping, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from shortlist._tokens import default_counter  # noqa: E402
from shortlist.offer import PRICE_PRESETS, Prices  # noqa: E402
from shortlist.runtime import Conversation, Pack, Tool  # noqa: E402
from shortlist.runtime._context import DEFAULT_LOW_WATER  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared replaying model
from _replay import answer, callable_tools  # noqa: E402

_PROSE = (
    "the team reviewed each option carefully before settling on a plan that balanced cost speed and risk "
    "while keeping every stakeholder informed about progress milestones budgets schedules dependencies "
    "vendors contracts reviews approvals audits metrics dashboards incidents releases migrations backups "
    "so the next steps stay clear for everyone involved in the work ahead of the coming weeks"
)
FILLER = _PROSE.split(" ")
TOPICS = ["order", "invoice", "ticket", "account", "shipment", "booking", "refund", "subscription"]

#: (who states it, the sentence with ``{v}`` for the id, the question that asks for it, id prefix)
NEEDLES: list[tuple[str, str, str, str]] = [
    ("user", "My locker code is {v}.", "What was my locker code again?", "L"),
    ("user", "Our project codename is {v}.", "Remind me of our project codename.", "P"),
    ("user", "The server rack I manage is {v}.", "Which server rack do I manage?", "R"),
    ("assistant", "Your ticket number is {v}.", "What ticket number did you give me?", "T"),
    ("assistant", "The order ships from depot {v}.", "Which depot does the order ship from?", "D"),
    ("assistant", "Your booking reference is {v}.", "What is my booking reference?", "B"),
    ("tool", "The account manager on file is agent {v}.", "Who is the account manager on file?", "A"),
    ("tool", "The warehouse slot assigned is {v}.", "Which warehouse slot was assigned?", "W"),
    ("tool", "The invoice was filed under batch {v}.", "Under which batch was the invoice filed?", "K"),
]
#: Turns at which the tool results state their needles (every third turn calls a tool).
TOOL_TURNS = (1, 4, 7)


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(n))


def generate(seed: int, turns: int = 60, answer_words: int = 260) -> dict[str, Any]:
    """One long trace (see the module docs); the same ``seed`` gives the same trace."""
    if turns < 12:
        raise SystemExit("--turns must be at least 12 (needles in the first turns, questions in the last third)")
    rng = random.Random(seed)
    values = [f"{prefix}{rng.randint(10000, 99999)}" for *_, prefix in NEEDLES]
    asked = rng.sample(range(turns - turns // 3, turns), len(NEEDLES))
    out_turns: list[dict[str, Any]] = []
    for t in range(turns):
        user = f"About the {rng.choice(TOPICS)}: {_words(rng, 28)}?"
        answer = "Here is what I found. " + _words(rng, answer_words)
        turn: dict[str, Any] = {}
        if t % 3 == 1:
            turn["tool_result"] = f"lookup done: {_words(rng, 120)}"
        for i, (who, sentence, question, _) in enumerate(NEEDLES):
            fact = sentence.format(v=values[i])
            if who == "user" and t == i:
                user = f"{fact} {user}"
            elif who == "assistant" and t == i - 3:
                answer = f"Noted. {fact} {answer}"
            elif who == "tool" and t == TOOL_TURNS[i - 6]:
                turn["tool_result"] = f"lookup done: {fact} {_words(rng, 110)}"
            if asked[i] == t:
                user = f"{question} {user}"
        out_turns.append({"user": user, "answer": answer, **turn})
    needles = [
        {
            "value": values[i],
            "stated_by": who,
            "turn": i if who == "user" else i - 3 if who == "assistant" else TOOL_TURNS[i - 6],
            "asked_at": asked[i],
        }
        for i, (who, *_rest) in enumerate(NEEDLES)
    ]
    return {"cid": f"long_{seed}", "turns": out_turns, "needles": needles}


# -- driving a trace through the runtime ----------------------------------------------------------
def _tools(state: dict[str, Any]) -> list[Tool]:
    def make(name: str) -> Tool:
        def run(**kwargs: Any) -> str:
            return str(state.get("result", "lookup done"))

        return Tool(
            name=name,
            description=f"Look up a {name.split('_')[1]} record by id.",
            func=run,
            parameters={"type": "object", "properties": {"id": {"type": "string"}}},
        )

    return [make(f"lookup_{t}") for t in TOPICS]


SETTINGS: dict[str, dict[str, Any]] = {
    "rare+facts": {},
    "rare": {"keep_facts": False},
    "per_turn": {"low_water": 1.0, "keep_facts": False},
    "per_turn_newest": {"low_water": 1.0, "keep_facts": False, "reduction": "newest"},
}


def run_trace(
    trace: Mapping[str, Any], fmt: str, budget: int, setting: str, low_water: float = DEFAULT_LOW_WATER
) -> dict[str, Any]:
    """Drive one trace; return its requests and each turn's report."""
    requests: list[dict[str, Any]] = []
    state: dict[str, Any] = {}
    turns: Sequence[Mapping[str, Any]] = trace["turns"]

    def model(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(json.loads(json.dumps(req)))
        turn = turns[state["turn"]]
        if "tool_result" in turn and not state.get("called"):
            host = [n for n in callable_tools(req, fmt) if n.startswith("lookup_")]
            if host:
                state["called"], state["result"] = True, turn["tool_result"]
                return answer(fmt, "", (host[0], f"c{len(requests)}"), req, {"id": "x"})
        return answer(fmt, str(turn["answer"]))

    pack = Pack(system_prompt="You are a support agent for a logistics company.", tools=_tools(state))
    conv = Conversation(
        pack,
        model=model,
        format=fmt,  # type: ignore[arg-type]
        tool_selector="bm25",
        k=3,
        max_tokens=budget,
        **{"low_water": low_water, **SETTINGS[setting]},
    )
    starts: list[int] = []
    reports = []
    try:
        for t, turn in enumerate(turns):
            state.update(turn=t, called=False)
            starts.append(len(requests))
            reports.append(conv.send(str(turn["user"])).report)
    finally:
        conv.close()
    return {"requests": requests, "starts": starts, "reports": reports}


# -- measuring ------------------------------------------------------------------------------------
def _strip(message: Any) -> Any:
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return message
    return {**message, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in content]}


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def request_cost(requests: Sequence[Mapping[str, Any]], fmt: str, prices: Prices) -> float:
    """The requests priced by the cache rules (see the module docs)."""
    count = default_counter().count
    total = 0.0
    prev: tuple[str, str, list[str]] | None = None
    for req in requests:
        messages = list(req["messages"])
        system: Any = req.get("system") if fmt == "anthropic" else messages.pop(0)
        parts = (_dump(req.get("tools")), _dump(system), [_dump(_strip(m)) for m in messages])
        sizes = [count(parts[0]), count(parts[1]), *(count(m) for m in parts[2])]
        prompt = sum(sizes)
        cached = 0
        if prev is not None and prev[0] == parts[0]:
            cached = sizes[0]
            if prev[1] == parts[1]:
                cached += sizes[1]
                for i, (a, b) in enumerate(zip(prev[2], parts[2], strict=False)):
                    if a != b:
                        break
                    cached += sizes[2 + i]
        total += prices.call(prompt, cached)
        prev = parts
    return total


def measure(trace: Mapping[str, Any], run: Mapping[str, Any], fmt: str, prices: Prices) -> dict[str, Any]:
    requests, starts, reports = run["requests"], run["starts"], run["reports"]
    needles = trace["needles"]
    reduced_turns = [t for t, r in enumerate(reports) if (r.reduction or {}).get("reduced")]
    after: list[float | None] = []
    for t in reduced_turns[:3]:
        text = _dump(requests[starts[t]])
        stated = [n for n in needles if n["turn"] < t]
        after.append(sum(n["value"] in text for n in stated) / len(stated) if stated else None)
    asked = sum(n["value"] in _dump(requests[starts[n["asked_at"]]]) for n in needles) / len(needles)
    return {
        "cost": request_cost(requests, fmt, prices),
        "requests": len(requests),
        "reductions": len(reduced_turns),
        "prefix_breaks": sum(len(r.prefix_breaks) for r in reports),
        "kept_after": after,
        "kept_when_asked": asked,
        "kept_when_asked_by": {
            who: sum(n["value"] in _dump(requests[starts[n["asked_at"]]]) for n in needles if n["stated_by"] == who)
            / sum(1 for n in needles if n["stated_by"] == who)
            for who in ("user", "assistant", "tool")
        },
    }


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return round(sum(got) / len(got), 3) if got else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=5)
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--answer-words", type=int, default=260)
    ap.add_argument("--budget", type=int, default=6000)
    ap.add_argument("--low-water", type=float, default=DEFAULT_LOW_WATER, help="of the rare settings (0.5)")
    ap.add_argument("--prices", choices=list(PRICE_PRESETS), default="anthropic-5m")
    ap.add_argument("--formats", default="anthropic,openai")
    ap.add_argument("--write", metavar="DIR", help="also store the traces as DIR/traces.jsonl")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    traces = [generate(1000 + i, args.turns, args.answer_words) for i in range(args.traces)]
    if args.write:
        Path(args.write).mkdir(parents=True, exist_ok=True)
        with open(Path(args.write) / "traces.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(t, sort_keys=True) + "\n" for t in traces)
    prices = Prices.preset(args.prices)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    rows: dict[str, dict[str, Any]] = {}
    for setting in SETTINGS:
        runs = [
            measure(trace, run_trace(trace, fmt, args.budget, setting, args.low_water), fmt, prices)
            for trace in traces
            for fmt in formats
        ]
        rows[setting] = {
            "cost": round(sum(r["cost"] for r in runs) / len(runs), 1),
            "requests": round(sum(r["requests"] for r in runs) / len(runs), 1),
            "reductions": round(sum(r["reductions"] for r in runs) / len(runs), 2),
            "prefix_breaks": round(sum(r["prefix_breaks"] for r in runs) / len(runs), 2),
            "kept_after": [
                _mean([r["kept_after"][k] if len(r["kept_after"]) > k else None for r in runs]) for k in range(3)
            ],
            "kept_when_asked": _mean([r["kept_when_asked"] for r in runs]),
            "kept_when_asked_by": {
                who: _mean([r["kept_when_asked_by"][who] for r in runs]) for who in ("user", "assistant", "tool")
            },
        }
    base = rows["per_turn"]["cost"]
    for row in rows.values():
        row["cost_vs_per_turn"] = round(row["cost"] / base, 3) if base else None
    count = default_counter().count
    said = (
        count(t["user"]) + count(t["answer"]) + count(t.get("tool_result", "")) for tr in traces for t in tr["turns"]
    )
    result: dict[str, Any] = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("json", "write")},
        "tokens_per_trace": round(sum(said) / len(traces)),
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{args.traces} traces x {args.turns} turns (~{result['tokens_per_trace']:,} tokens each) x "
        f"{len(formats)} formats, history budget {args.budget:,} tokens, prices {args.prices}"
    )
    print(
        f"{'setting':15} {'cost':>9} {'x per_turn':>10} {'reductions':>10} {'breaks':>7} "
        f"{'kept after 1/2/3':>18} {'when asked':>10}"
    )
    for name, r in rows.items():
        kept = "/".join("-" if v is None else f"{v:.2f}" for v in r["kept_after"])
        print(
            f"{name:15} {r['cost']:>9,.0f} {r['cost_vs_per_turn']:>9.3f}x {r['reductions']:>10.1f} "
            f"{r['prefix_breaks']:>7.1f} {kept:>18} {r['kept_when_asked']:>10.2f}"
        )
    print("kept when asked, by who stated it: " + "; ".join(f"{n}: {r['kept_when_asked_by']}" for n, r in rows.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
