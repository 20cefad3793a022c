"""Name-level scoring (``match="name"``, ``shortlist eval --match name``): ids sharing a name are one gold."""

from __future__ import annotations

import pytest

from shortlist._types import Candidate
from shortlist.eval._datasets import Dataset, EvalQuery
from shortlist.eval._runner import QueryOutcome, by_name, run_eval
from shortlist.testing import StaticSelector

TOOLS = (
    Candidate("weather_v1", "get_current_weather", "weather for a city"),
    Candidate("weather_v2", "get_current_weather", "current weather, another definition"),
    Candidate("email", "send_email", "send an email"),
    Candidate("stocks", "stock_quote", "a stock price"),
)


def outcome(gold: tuple[str, ...], ranked: tuple[str, ...]) -> QueryOutcome:
    return QueryOutcome("q", "all", gold, ranked, None, None, ranked[:5], False, 0.0, 0)


def test_by_name_maps_ids_to_names_and_drops_repeats() -> None:
    names = {t.id: t.name for t in TOOLS}
    [o] = by_name([outcome(("weather_v2",), ("weather_v1", "weather_v2", "email", "ghost"))], names)
    assert o.gold == ("get_current_weather",)
    assert o.ranked == ("get_current_weather", "send_email", "ghost")  # unknown ids keep their id
    assert o.surfaced == ("get_current_weather", "send_email", "ghost")


def test_a_same_name_variant_counts_at_name_level_only() -> None:
    queries = (EvalQuery("q1", "weather in Oslo", ("weather_v2",)), EvalQuery("q2", "mail anna", ("email",)))
    dataset = Dataset("tiny", TOOLS, queries)
    # The selector always puts the other weather definition first, then email.
    selector = StaticSelector(["weather_v1", "email", "stocks"], name="static")
    rep = run_eval(selector, dataset, k=1, progress=False, match="name")
    # By id: q1 never finds weather_v2, q2 has email second.
    assert (rep["recall@1"], rep["recall@5"]) == (0.0, 0.5)
    # By name: q1's first answer is a get_current_weather definition.
    assert (rep["by_name"]["recall@1"], rep["by_name"]["recall@5"]) == (0.5, 1.0)
    assert rep["by_name"]["splits"]["all"]["queries"] == 2
    assert "by_name" not in run_eval(selector, dataset, k=1, progress=False)
    with pytest.raises(ValueError):
        run_eval(selector, dataset, progress=False, match="tool")  # type: ignore[arg-type]
