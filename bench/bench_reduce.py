"""Benchmark of context reduction (issue 5): stage latency and needle retention.

1. Latency: a 1,000-message agent conversation (tool calls with large outputs), budget 25% of its
   tokens, local reducers only (no model). The first run counts every fragment (cold); the
   following runs hit the per-text token cache. Reports p50/p99 of the cached runs.
2. Retention: synthetic agent traces whose final question depends on a few earlier steps
   ("needles"). The question paraphrases each needle and shares only a few key terms with it
   (the entity name plus at most one content word), and hard distractors mention the same
   entities and the same kinds of facts. At 10/25/50% budgets it reports the share of needles whose
   sentence survives intact with newest-first (the common ``trim_messages`` behaviour) and with the
   relevance-aware selector, both through the full stage (truncate rung included) and with
   selection alone (truncate rung disabled).

Run: ``.venv/bin/python bench/bench_reduce.py [--json] [--traces N] [--runs N]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from shortlist._tokens import CachedCounter, TiktokenCounter  # noqa: E402
from shortlist.reduction import (  # noqa: E402
    ContextFragment,
    ReductionStage,
    newest_first_selector,
    openai_to_fragments,
    relevance_selector,
)
from shortlist.reduction._contract import ContextSelector  # noqa: E402

SEED = 20261130

# ---------------------------------------------------------------------------------------------
# synthetic vocabulary


def _pseudo_words(rng: random.Random, n: int) -> list[str]:
    onsets = ["b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
    codas = ["", "n", "r", "s", "t", "l", "x", "nd", "rk"]
    words: set[str] = set()
    while len(words) < n:
        syll = rng.randint(2, 3)
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syll)))
    return sorted(words)


TECH = [
    "request",
    "response",
    "handler",
    "config",
    "module",
    "import",
    "return",
    "error",
    "warning",
    "info",
    "debug",
    "trace",
    "stack",
    "function",
    "class",
    "method",
    "variable",
    "build",
    "test",
    "deploy",
    "container",
    "image",
    "cluster",
    "node",
    "pod",
    "service",
    "queue",
    "cache",
    "index",
    "query",
    "schema",
    "migration",
    "table",
    "column",
    "row",
    "field",
    "value",
    "type",
    "string",
    "integer",
    "timeout",
    "latency",
    "throughput",
    "metric",
    "dashboard",
    "alert",
    "log",
    "line",
    "file",
    "path",
    "directory",
    "commit",
    "branch",
    "merge",
    "review",
    "patch",
    "release",
    "version",
    "dependency",
    "package",
    "install",
    "update",
    "upgrade",
    "rollback",
]

# (needle sentence, question clause) templates: the clause paraphrases the needle; overlap is the
# entity plus at most one content word.
FACTS = [
    (
        "Retries for {e} are capped at {n} attempts with exponential backoff starting at {ms} ms.",
        "how many times does {e} try a failed call again and how long does it wait at first",
    ),
    (
        "The {e} database credentials were moved to vault path secret/{w}/{w2}.",
        "where are the DB creds for {e} kept now",
    ),
    (
        "{e} listens on port {port} behind the internal load balancer.",
        "which port does {e} serve traffic on",
    ),
    (
        "Deploys of {e} are frozen until {date} because of the quarterly audit.",
        "when are we allowed to ship {e} again",
    ),
    (
        "The memory limit of {e} was raised to {n}00 MiB after OOM kills on node pool {w}.",
        "what is the RAM ceiling for {e} after those crashes",
    ),
    (
        "{e} is owned by the {w} team; their on-call channel is #{w2}-oncall.",
        "who maintains {e} and how do I page them",
    ),
    (
        "Feature flag {w}_{w2} gates the new checkout path in {e} and defaults to off.",
        "which toggle switches on the new checkout flow of {e}",
    ),
]

# hard distractors: same entities, same kind of subject, different (wrong) facts or no fact
DISTRACTORS = [
    "grep found {n} references to {e} in tests/ and docs/; none of them changed.",
    "The {e} README mentions retries, ports and vault paths but is out of date.",
    "Opened the {e} dashboard: latency p99 {ms} ms, error rate flat.",
    "Retries for {o} are capped at {n} attempts with exponential backoff starting at {ms} ms.",
    "{o} listens on port {port} behind the internal load balancer.",
    "Deploys of {o} are frozen until {date} because of the quarterly audit.",
    "The memory limit of {o} was raised to {n}00 MiB after OOM kills on node pool {w}.",
]


@dataclass
class Trace:
    messages: list[dict[str, Any]]
    needles: list[str]


def _fill(rng: random.Random, vocab: list[str], n: int) -> str:
    words = [rng.choice(TECH) if rng.random() < 0.45 else rng.choice(vocab) for _ in range(n)]
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return "\n".join(lines)


def _slots(rng: random.Random, vocab: list[str], e: str, o: str) -> dict[str, Any]:
    return {
        "e": e,
        "o": o,
        "n": rng.randint(2, 9),
        "ms": rng.choice([50, 100, 200, 250, 500]),
        "port": rng.randint(1025, 65000),
        "w": rng.choice(vocab),
        "w2": rng.choice(vocab),
        "date": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
    }


def make_trace(rng: random.Random, vocab: list[str], steps: int, n_needles: int = 3) -> Trace:
    """An agent trace: system, a task, ``steps`` tool steps, then a question needing the needles."""
    entities = [f"{rng.choice(vocab)}-{rng.choice(['api', 'queue', 'worker', 'gateway', 'store'])}" for _ in range(8)]
    targets = entities[:n_needles]
    facts = rng.sample(FACTS, n_needles)
    needle_steps = sorted(rng.sample(range(int(steps * 0.9)), n_needles))
    needle_at = dict(zip(needle_steps, range(n_needles), strict=True))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful SRE agent. Use the tools, then answer precisely."},
        {"role": "user", "content": "Audit our services and collect what matters for the next release."},
    ]
    needles: list[str] = []
    for s in range(steps):
        out_words = rng.randint(40, 400)
        body = _fill(rng, vocab, out_words).split("\n")
        if s in needle_at:
            k = needle_at[s]
            sentence = facts[k][0].format(**_slots(rng, vocab, targets[k], entities[-1]))
            needles.append(sentence)
            body.insert(rng.randint(0, len(body)), sentence)
        elif rng.random() < 0.4:  # hard distractor: a target entity, the same kinds of words
            e, o = rng.choice(targets), rng.choice(entities[n_needles:])
            body.insert(rng.randint(0, len(body)), rng.choice(DISTRACTORS).format(**_slots(rng, vocab, e, o)))
        tool = rng.choice(["read_file", "grep", "run_shell", "http_get", "list_dir"])
        cid = f"call_{s}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps({"arg": rng.choice(vocab)})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": cid, "content": "\n".join(body)})
        if rng.random() < 0.15:
            messages.append({"role": "assistant", "content": _fill(rng, vocab, rng.randint(10, 40))})
    clauses = [facts[k][1].format(e=targets[k]) for k in range(n_needles)]
    messages.append({"role": "user", "content": "Before the release: " + "; ".join(clauses) + "?"})
    return Trace(messages=messages, needles=needles)


# ---------------------------------------------------------------------------------------------
# measurements


def _stage(budget: int, counter: CachedCounter, selector: ContextSelector, cap: int | None = None) -> ReductionStage:
    return ReductionStage(
        "bench", max_tokens=budget, counter=counter, selector=selector, max_calls=0, max_tool_output_tokens=cap
    )


def retention(traces: int, steps: int) -> dict[str, Any]:
    rng = random.Random(SEED)
    vocab = _pseudo_words(rng, 4000)
    counter = CachedCounter(TiktokenCounter("o200k_base"))
    selectors = {"newest_first": newest_first_selector(), "relevance": relevance_selector()}
    budgets = (0.10, 0.25, 0.50)
    kept: dict[str, dict[str, list[int]]] = {}
    total_needles = 0
    for _ in range(traces):
        trace = make_trace(rng, vocab, steps)
        frags = openai_to_fragments(trace.messages)
        size = sum(counter.count(f.text) for f in frags)
        total_needles += len(trace.needles)
        for mode, cap in (("default", None), ("trunc256", 256)):
            for name, selector in selectors.items():
                for b in budgets:
                    stage = _stage(int(size * b), counter, selector, cap)
                    result = stage.reduce_sync(frags)
                    text = "\n".join(f.text for f in result.fragments)
                    hits = sum(1 for n in trace.needles if n in text)
                    kept.setdefault(f"{mode}/{name}", {}).setdefault(f"{int(b * 100)}%", []).append(hits)
    table = {
        key: {b: round(sum(v) / total_needles, 3) for b, v in by_budget.items()} for key, by_budget in kept.items()
    }
    return {"traces": traces, "steps_per_trace": steps, "needles": total_needles, "kept_share": table}


def agent_conversation(n_messages: int = 1000) -> list[ContextFragment]:
    rng = random.Random(SEED + 1)
    vocab = _pseudo_words(rng, 4000)
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    i = 0
    while len(msgs) < n_messages - 1:
        if i % 25 == 0:
            msgs.append({"role": "user", "content": "next: " + _fill(rng, vocab, 20)})
        cid = f"c{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": _fill(rng, vocab, rng.randint(100, 1000))})
        i += 1
    msgs = msgs[: n_messages - 1]
    if msgs[-1]["role"] == "assistant":  # never end on an unanswered call
        msgs.pop()
    while len(msgs) < n_messages - 1:
        msgs.append({"role": "assistant", "content": "noted"})
    msgs.append({"role": "user", "content": "Which module defines the retry policy for the worker queue?"})
    return openai_to_fragments(msgs)


def latency(runs: int, freeze: bool) -> dict[str, Any]:
    """Time the stage; with ``freeze`` the heap built during setup is moved out of the collector's way."""
    frags = agent_conversation(1000)
    out: dict[str, Any] = {"messages": len(frags), "gc_freeze": freeze}

    async def measure(name: str, selector: ContextSelector) -> dict[str, Any]:
        counter = CachedCounter(TiktokenCounter("o200k_base"))
        size = sum(TiktokenCounter("o200k_base").count(f.text) for f in frags)
        stage = _stage(size // 4, counter, selector)
        t0 = time.perf_counter()
        first = await stage.reduce(frags)
        cold = (time.perf_counter() - t0) * 1000
        if freeze:
            gc.collect()
            gc.freeze()
        times, cpu = [], []
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            result = await stage.reduce(frags)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            assert result.fragments == first.fragments
        if freeze:
            gc.unfreeze()
        times.sort()
        cpu.sort()
        return {
            "tokens_before": first.tokens_before,
            "tokens_after": first.tokens_after,
            "budget": size // 4,
            "kept_fragments": len(first.fragments),
            "rungs": [e.to_dict()["kind"] for e in first.diagnostics if e.name == "reduction.applied"],
            "first_ms": round(cold, 2),
            "p50_ms": round(statistics.median(times), 3),
            "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
            "cpu_p50_ms": round(statistics.median(cpu), 3),
            "cpu_p99_ms": round(cpu[min(len(cpu) - 1, int(len(cpu) * 0.99))], 3),
            "runs": runs,
        }

    for name, selector in (("newest_first", newest_first_selector()), ("relevance", relevance_selector())):
        out[name] = asyncio.run(measure(name, selector))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--traces", type=int, default=40, help="retention traces (default 40)")
    parser.add_argument("--steps", type=int, default=150, help="tool steps per trace (default 150)")
    parser.add_argument("--runs", type=int, default=200, help="timed latency runs (default 200)")
    args = parser.parse_args()
    report = {
        "latency": latency(args.runs, freeze=False),
        "latency_gc_frozen": latency(args.runs, freeze=True),
        "retention": retention(args.traces, args.steps),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    lat = report["latency"]
    print(f"Stage latency: {lat['messages']} messages, budget 25% of tokens, local reducers only")
    print(
        f"{'selector':<24}{'tokens':>9}{'budget':>9}{'after':>9}{'first ms':>10}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'cpu p50':>9}{'cpu p99':>9}  rungs"
    )
    for key, label in (("latency", ""), ("latency_gc_frozen", " gc.freeze")):
        for name in ("newest_first", "relevance"):
            r = report[key][name]
            print(
                f"{name + label:<24}{r['tokens_before']:>9}{r['budget']:>9}{r['tokens_after']:>9}"
                f"{r['first_ms']:>10.1f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['cpu_p50_ms']:>9.2f}"
                f"{r['cpu_p99_ms']:>9.2f}  {'+'.join(r['rungs'])}"
            )
    print(
        f"(wall and CPU ms over {lat['newest_first']['runs']} runs after the first, cached count; "
        "'gc.freeze' freezes the setup heap so full collections skip it)"
    )
    ret = report["retention"]
    print(
        f"\nNeedle retention: {ret['traces']} traces x {ret['steps_per_trace']} tool steps, "
        f"{ret['needles']} needles (share of needle sentences kept intact)"
    )
    print(f"{'pipeline/selector':<26}{'10%':>8}{'25%':>8}{'50%':>8}")
    for key, row in ret["kept_share"].items():
        print(f"{key:<26}{row['10%']:>8.3f}{row['25%']:>8.3f}{row['50%']:>8.3f}")


if __name__ == "__main__":
    main()
