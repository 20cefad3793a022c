"""A small tool catalog of plain functions, shared by the framework integration tests.

Each test wraps these functions in its framework's own tool type; the selector is ``bm25`` (fast,
no model to load), so which tools a query narrows to is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shortlist._events import Event


def get_weather(city: str) -> str:
    """Get the weather forecast (rain, temperature, wind) for a city."""
    return f"sunny in {city}"


def book_flight(origin: str, destination: str) -> str:
    """Book a flight ticket between two airports."""
    return f"flight {origin}->{destination} booked"


def book_hotel(city: str, nights: int) -> str:
    """Reserve a hotel room in a city for some nights."""
    return f"hotel in {city} for {nights} nights"


def convert_currency(amount: float, currency: str) -> str:
    """Convert an amount of money into another currency at today's exchange rate."""
    return f"{amount} {currency}"


def stock_price(ticker: str) -> str:
    """Look up the latest stock market price of a company ticker."""
    return f"{ticker}: 100"


def translate_text(text: str, language: str) -> str:
    """Translate a text into another language."""
    return f"[{language}] {text}"


def send_email(to: str, body: str) -> str:
    """Send an email message to a recipient."""
    return f"sent to {to}"


def create_calendar_event(title: str, date: str) -> str:
    """Create an event in the user's calendar on a date."""
    return f"{title} on {date}"


def search_news(topic: str) -> str:
    """Search today's news headlines about a topic."""
    return f"news about {topic}"


def find_recipe(dish: str) -> str:
    """Find a cooking recipe with ingredients for a dish."""
    return f"recipe for {dish}"


def play_music(song: str) -> str:
    """Play a song or an artist's music on the speaker."""
    return f"playing {song}"


def get_directions(origin: str, destination: str) -> str:
    """Get driving directions and a route map between two places."""
    return f"route {origin}->{destination}"


FUNCTIONS: tuple[Callable[..., str], ...] = (
    get_weather,
    book_flight,
    book_hotel,
    convert_currency,
    stock_price,
    translate_text,
    send_email,
    create_calendar_event,
    search_news,
    find_recipe,
    play_music,
    get_directions,
)
NAMES: tuple[str, ...] = tuple(f.__name__ for f in FUNCTIONS)


class Events:
    """An event hook that keeps what it saw."""

    def __init__(self) -> None:
        self.seen: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.seen.append(event)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.seen if e.name == name]


#: A system prompt of about 1,000 tokens (characters / 4): with ``horizon=1`` the ``stable`` policy neither widens
#: to the whole 12-tool catalog (carrying it would cost more) nor changes the block on a later turn (re-writing the
#: prefix would cost more than the search it saves), so its tools stay exactly what the first turn decided.
SYSTEM = "You are a helpful assistant for travel, money, office and leisure questions. " * 52

#: Four user turns with different requests (the second and fourth rank other tools first under ``per_turn``).
TURNS = (
    "what is the weather forecast in Paris?",
    "book a flight ticket to Rome",
    "convert ten euros into another currency",
    "play a song by Queen",
)


#: A user message whose tools are offered, and a search that names them and others: a search from the
#: conversation leaves out the offered tools and, asked again, pages on (``ToolNarrower.search``).
TRAVEL = "book a flight ticket to Rome"
TRAVEL_SEARCH = "book a flight ticket or a hotel room, get directions to the airport"


def assert_searches_page_past_the_offer(offered: list[str], results: list[str]) -> None:
    """Two ``find_tools`` results for :data:`TRAVEL_SEARCH`: neither repeats an offered tool nor the other's."""
    from shortlist.integrations._core import found_in

    assert "book_flight" in offered and len(results) == 2
    first, second = (found_in(r) for r in results)
    assert first and second, results
    assert not set(first) & set(offered) and not set(second) & {*offered, *first}, (offered, first, second)
