"""The offline fact sheet: which sentences state facts, and how the sheet keeps them."""

from __future__ import annotations

import pytest

from shortlist.reduction._facts import FACTS_HEADER, FactSheet, extract_facts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My locker code is 4821.", ["My locker code is 4821."]),
        ("Noted. Your ticket number is T90412. the team reviewed it", ["Your ticket number is T90412."]),
        ("Write to ops@example.com today.", ["Write to ops@example.com today."]),
        ("The release is set for 2026-05-01.", ["The release is set for 2026-05-01."]),
        ("My manager is Alice Smith.", ["My manager is Alice Smith."]),
        ("Answer: The team met.", []),  # a capital after a colon opens a sentence: no name
        ("The team reviewed 5 options.", []),  # one digit alone is not a fact
        ("the team reviewed each option carefully", []),
        ("", []),
    ],
)
def test_which_sentences_state_facts(text: str, expected: list[str]) -> None:
    assert extract_facts(text) == expected


def test_a_long_sentence_is_clipped_around_its_fact() -> None:
    words = " ".join(f"w{c}" for c in "abcdefghijklmnopqrstuvwxyz")  # no digits
    long = f"{words} then the code is 7731 and {words}"
    (fact,) = extract_facts(long, window=3)
    assert fact == "… the code is 7731 and wa wb …"


def test_the_sheet_deduplicates_and_drops_the_oldest_over_its_cap() -> None:
    sheet = FactSheet(len, max_size=10_000)
    assert sheet.add([("user", "My locker code is 4821."), ("assistant", "Your ticket is T90412.")]) == 2
    assert sheet.add([("user", "My locker code is 4821.")]) == 0  # said again: kept once
    assert sheet.render().splitlines() == [
        FACTS_HEADER,
        "- user: My locker code is 4821.",
        "- assistant: Your ticket is T90412.",
    ]
    sheet.fit(len(FACTS_HEADER) + 40)
    assert sheet.facts == ["- assistant: Your ticket is T90412."]  # the oldest went first
    sheet.fit(0)
    assert sheet.facts == [] and sheet.render() == ""


def test_over_its_cap_the_sheet_drops_short_numbers_before_ids() -> None:
    sheet = FactSheet(len, max_size=10_000)
    sheet.add([("assistant", "Your booking reference is B31337.")])
    sheet.add([("user", f"question {n}: the plan moved") for n in range(10, 20)])
    sheet.fit(len(FACTS_HEADER) + 90)
    assert sheet.facts[0] == "- assistant: Your booking reference is B31337."  # the id outlives newer, weaker facts
    assert len(sheet.facts) == 2 and sheet.facts[1] == "- user: question 19: the plan moved"
