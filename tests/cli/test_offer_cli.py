"""``shortlist offer`` called in-process, and as a real subprocess (slow; ``cli_mode``): a conversation carried
turn to turn through --state files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from inprocess import run_cli

pytestmark = pytest.mark.usefixtures("cli_mode")  # in-process, and as a real subprocess (slow)


def offer(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("offer", "--selector", "bm25", *args)


def test_turns_carry_their_state_and_the_block_never_changes(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = offer("what's the weather in Paris tomorrow", "--format", "anthropic", "--save-state", str(state), "--json")
    assert first.returncode == 0, first.stderr
    one = json.loads(first.stdout)
    assert one["policy"] == "deferred" and one["reason"] == "first_turn" and one["search_tool"]
    assert "get_weather_forecast" in one["prefetched"]
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps([{"role": "user", "content": "book a flight to Rome"}]))
    second = offer(
        "--messages",
        str(messages),
        "--format",
        "anthropic",
        "--state",
        str(state),
        "--save-state",
        str(state),
        "--json",
    )
    two = json.loads(second.stdout)
    assert two["block"] == one["block"] and not two["changed"]
    # BM25 does not pad with tools that share no term with the query: turn 1 (the weather) did not
    # prefetch search_flights, turn 2 does
    assert "search_flights" not in one["prefetched"]
    assert sorted(two["prefetched"]) == ["book_hotel", "search_flights"]
    assert two["loaded"] == [*one["loaded"], *two["prefetched"]]
    assert json.loads(state.read_text())["turns"] == 2
    found = offer("--search", "convert an amount of money", "--format", "anthropic", "--state", str(state), "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["tools"][0]["id"] == "convert_currency"


def test_per_turn_text_output() -> None:
    out = offer("book a hotel in Rome", "--policy", "per_turn")
    assert out.returncode == 0 and "book_hotel" in out.stdout and "per_turn" in out.stdout


def test_bad_input_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"block": 3}')
    for args, message in [
        (("x", "--state", str(bad)), "invalid offer state"),
        ((), "exactly one of QUERY or --messages"),
        (("--messages", str(bad)), "JSON list of message objects"),
        (("x", "--k", "-1"), "must be >= 0"),
    ]:
        out = offer(*args)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_the_default_policy_is_the_formats() -> None:
    """Like ``/v1/offer`` and the runtime: deferred for openai (the default format, bridged) and anthropic."""
    plain = json.loads(offer("book a hotel in Rome", "--json").stdout)
    anthropic = json.loads(offer("book a hotel in Rome", "--format", "anthropic", "--json").stdout)
    assert (plain["policy"], anthropic["policy"]) == ("deferred", "deferred")


def test_the_text_block_shows_the_search_tool_it_offers() -> None:
    deferred = offer("book a hotel in Rome", "--format", "anthropic").stdout.splitlines()
    assert deferred[0].startswith("block ") and deferred[0].split()[-1] == "find_tools"
    per_turn = offer("book a hotel in Rome", "--policy", "per_turn").stdout.splitlines()
    assert "find_tools" not in per_turn[0]  # per_turn offers no search tool
    bridged = offer("book a hotel in Rome").stdout.splitlines()  # openai chat, deferred: the bridge
    assert bridged[0].split()[-2:] == ["find_tools", "call_tool"]
    native = offer("book a hotel in Rome", "--format", "openai-responses", "--json").stdout
    assert json.loads(native)["bridge"] is False


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        (("--prefetch-cold", "0"), 4),
        (("--prefetch-max", "2", "--prefetch-cold", "0"), 2),
        (("--prefetch-max", "0", "--prefetch-cold", "0"), 1),
        (("--prefetch-max", "1"), 3),  # the first turn: 2 more, widened 2 further
    ],
)
def test_prefetch_max_and_cold_bound_the_widening_of_a_flat_top(
    tmp_path: Path, flag: tuple[str, ...], expected: int
) -> None:
    catalog = tmp_path / "ties.json"  # four tools with the same words: a flat top (names apart by a word, not versions)
    tools = [{"name": f"send_{w}", "description": "Send a message."} for w in ("a", "b", "c", "d")]
    catalog.write_text(json.dumps(tools))
    out = offer("send a message", "--catalog", str(catalog), "--prefetch", "1", *flag, "--json")
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["prefetched"]) == expected


@pytest.mark.parametrize("flag", ["--prefetch-max", "--prefetch-cold", "--prefetch-tokens", "--search-tokens"])
def test_a_negative_prefetch_bound_is_a_one_line_error(flag: str) -> None:
    out = offer("send a message", flag, "-1")
    assert out.returncode != 0 and flag in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("command", ["offer", "eval"])
def test_the_help_states_the_prefetch_defaults_the_offer_uses(command: str) -> None:
    """The help text cannot import the offer (start-up time), so it repeats its defaults: keep them equal."""
    from shortlist.offer._policies import (
        DEFAULT_PREFETCH,
        DEFAULT_PREFETCH_COLD,
        DEFAULT_PREFETCH_MAX,
        DEFAULT_PREFETCH_TOKENS,
    )
    from shortlist.offer._search import DEFAULT_SEARCH_TOKENS

    helped = run_cli(command, "--help")
    text = " ".join(helped.stdout.split())
    assert f"while no tool was called yet (default {DEFAULT_PREFETCH_COLD})" in text
    assert f"loaded ('none': any size; default {DEFAULT_PREFETCH_TOKENS})" in text
    assert f"tokens ('none': any size; default {DEFAULT_SEARCH_TOKENS})" in text
    assert f"top tools loaded this turn (default {DEFAULT_PREFETCH})" in text or (
        f"top tools loaded per turn (default {DEFAULT_PREFETCH})" in text
    )
    assert f"flat (default {DEFAULT_PREFETCH_MAX};" in text or f"flat (default {DEFAULT_PREFETCH_MAX})" in text
