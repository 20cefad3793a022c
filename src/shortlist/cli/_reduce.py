"""``shortlist reduce``: fit an OpenAI chat ``messages`` file to a token/character budget.

Prints the reduced messages on stdout and, on stderr, what was kept, truncated and dropped
(with ``--json``: one object with the messages, the token counts before and after, and the
diagnostics). The default selector is ``relevance``, as the library's ``Conversation``: the
steps most relevant to the last user message are kept (an early "I am allergic to peanuts"
survives a question about it), where ``newest`` keeps the latest steps that fit. Exit code 3,
with a message saying by how much, when the budget cannot be met without touching protected
content.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shortlist.cli._output import fail, write_json

if TYPE_CHECKING:
    from shortlist.reduction._contract import Diagnostics

__all__ = ["register"]

BUDGET_EXIT_CODE = 3


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def register(subparsers: Any) -> None:
    """Add the ``reduce`` subcommand to ``subparsers``."""
    parser = subparsers.add_parser(
        "reduce",
        help="fit a conversation to a token/character budget",
        description=(
            "Reduce an OpenAI chat messages array to a budget without touching protected content "
            "(system/developer messages, the last user message, the newest step). Exit code 3 when "
            "that is impossible."
        ),
    )
    parser.add_argument("--messages", required=True, metavar="FILE", help="JSON array of chat messages ('-' = stdin)")
    parser.add_argument("--max-tokens", type=_positive_int, metavar="N", help="token budget")
    parser.add_argument("--max-chars", type=_positive_int, metavar="N", help="character budget")
    parser.add_argument(
        "--selector",
        choices=("relevance", "newest"),
        default=None,
        help="which steps stay: relevance (default, as the library's Conversation: the steps most relevant "
        "to the last user message) or newest (the latest steps that fit)",
    )
    parser.add_argument("--model", default=None, help="model name choosing the tokenizer (default o200k_base)")
    parser.add_argument("--json", action="store_true", help="print messages, token counts and diagnostics")
    parser.set_defaults(func=run)


def _load(path: str) -> list[Any]:
    from shortlist.reduction._adapters import MessageFormatError

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise MessageFormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MessageFormatError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if not isinstance(data, list):
        raise MessageFormatError(f"{path}: expected a JSON array of messages (or an object with 'messages')")
    return data


def run(args: argparse.Namespace) -> int:
    """Handle ``shortlist reduce``; returns the exit code."""
    from shortlist.errors import ContextBudgetError
    from shortlist.reduction import ReductionStage, openai_from_fragments, openai_to_fragments
    from shortlist.reduction._contract import Diagnostics, ExecutionContext
    from shortlist.reduction._stage import DEFAULT_LOCAL_SELECTOR

    if args.max_tokens is None and args.max_chars is None:
        return fail("reduce: give --max-tokens, --max-chars or both")
    messages = _load(args.messages)
    fragments = openai_to_fragments(messages)
    args.selector = args.selector or DEFAULT_LOCAL_SELECTOR  # the one default, as the library's and /v1/reduce's
    stage = ReductionStage.local(
        "cli", max_tokens=args.max_tokens, max_chars=args.max_chars, selector=args.selector, model=args.model
    )
    diagnostics = Diagnostics()
    try:
        result = stage.reduce_sync(fragments, ExecutionContext(diagnostics=diagnostics))
    except ContextBudgetError as exc:
        return fail(f"reduce: {exc}", code=BUDGET_EXIT_CODE)
    reduced = openai_from_fragments(result.fragments)
    tokens_before = result.tokens_before
    tokens_after = result.tokens_after
    if tokens_before is None:  # char budget only: still report tokens
        tokens_before = sum(stage.counter.count(f.text) for f in fragments)
        tokens_after = sum(stage.counter.count(f.text) for f in result.fragments)
    if not args.json:
        write_json(reduced)
        _summary(args, diagnostics, len(messages), len(reduced), tokens_before, tokens_after)
        return 0
    write_json(
        {
            "messages": reduced,
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
            "chars_before": result.chars_before,
            "chars_after": result.chars_after,
            "counter": stage.counter.name,
            "diagnostics": diagnostics.to_list(),
        }
    )
    return 0


_VERBS = {"truncate": "truncated", "select": "dropped", "drop": "dropped", "compress": "summarised"}


def _summary(
    args: argparse.Namespace,
    diagnostics: Diagnostics,
    before: int,
    after: int,
    tokens_before: int | None,
    tokens_after: int | None,
) -> None:
    """Say on stderr what was kept, truncated, dropped or summarised (step ids: ``m<index>`` of the input)."""
    from shortlist.reduction._events import ReductionApplied

    budget = ", ".join(
        f"{label} {value}" for label, value in (("max tokens", args.max_tokens), ("max chars", args.max_chars)) if value
    )
    lines = [
        f"reduce ({args.selector}): kept {after} of {before} messages, {tokens_before} -> {tokens_after} tokens "
        f"({budget})"
    ]
    by_verb: dict[str, list[str]] = {}
    for event in diagnostics.events:
        if isinstance(event, ReductionApplied) and event.step_ids:
            by_verb.setdefault(_VERBS.get(event.kind, event.kind), []).extend(event.step_ids)
    if not by_verb:
        lines.append("  nothing removed: the conversation fits")
    for verb, ids in by_verb.items():
        lines.append(f"  {verb}: {', '.join(dict.fromkeys(ids))}  (m<N>: the input's message N, from 0)")
    try:
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
    except BrokenPipeError:
        pass
