"""The scale levers of the hybrid: tools named in the message rank first, near-duplicates take one
slot, a tool's server is evidence (``rankers/_scale.py``)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from shortlist._events import event_hooks
from shortlist._types import Candidate, Query, candidate_group
from shortlist.rankers._base import Scores
from shortlist.rankers._hybrid import HybridRanker
from shortlist.rankers._scale import (
    GroupLayout,
    NameIndex,
    demote_duplicates,
    group_ids,
    local_name,
    name_words,
    named_tools,
    naming_queries,
    same_tool,
    server_scores,
    spellings,
    variant_key,
    variants,
)
from shortlist.selection._query import quoted_kind, without_quoted
from shortlist.testing import HashEmbedder

FS = [
    Candidate("cat", "cat", "Display the contents of a file of any extension from the current directory."),
    Candidate("cd", "cd", "Change the current working directory to the specified folder."),
    Candidate("diff", "diff", "Compare two files line by line."),
    Candidate("search", "search", "Search the web for pages."),
    Candidate("get_weather", "get_weather", "Current weather for a city."),
    Candidate("get_weather_forecast", "get_weather_forecast", "Weather forecast for the next days for a city."),
    Candidate("send_message", "send_message", "Send a message to a contact in the messaging app."),
]
# Verbose distractors whose words match a request about project versions and files.
VERBOSE = [
    Candidate(
        f"project_api_{i}.get_project_by_name_and_version",
        f"project_api_{i}.get_project_by_name_and_version",
        "Get the project by its name and version: compare versions of a project, list the files of a "
        "project version, display the contents and the differences between two versions of the project files.",
    )
    for i in range(3)
]


def names(text: str, catalog: list[Candidate]) -> set[str]:
    index = NameIndex.build(catalog)
    return {catalog[i].id for i in named_tools(text, index)}


@pytest.mark.parametrize("spelling", ["get_weather", "getWeather", "get weather", "Get-Weather", "GET_WEATHER"])
def test_every_spelling_names_the_tool(spelling: str) -> None:
    assert names(f"use {spelling} for Oslo", FS) == {"get_weather"}
    assert names(f"the {spelling} tool, please", FS) == {"get_weather"}
    assert names(spelling, FS) == {"get_weather"}  # a search that is just the name


@pytest.mark.parametrize("spelling", ["get_weather", "getWeather", "Get-Weather", "get.weather", "(get_weather)"])
def test_an_identifier_names_the_tool_without_a_cue(spelling: str) -> None:
    assert names(f"please {spelling} for Oslo", FS) == {"get_weather"}


@pytest.mark.parametrize(
    "text",
    [
        "please get weather for Oslo",  # spaced words without a cue: prose
        "what is the exchange rate today",
        "translate 'discount' to Spanish",  # quotes are content, not code
        "save it as NY_AIR_QUALITY.csv",  # part of an identifier is not the identifier
    ],
)
def test_prose_and_parts_of_identifiers_name_nothing(text: str) -> None:
    catalog = [
        *FS,
        Candidate("exchange_rate", "exchange_rate", "Exchange rates."),
        Candidate("Discount", "Discount", "Discount codes."),
        Candidate("air_quality", "air_quality", "Air quality."),
    ]
    assert names(text, catalog) == set()


def test_a_longer_name_wins_over_the_name_inside_it() -> None:
    assert names("call get_weather_forecast for Rome", FS) == {"get_weather_forecast"}
    index = NameIndex.build(FS)
    both = named_tools("use get_weather then get_weather_forecast", index)
    assert {FS[i].id: n for i, n in both.items()} == {"get_weather": 2, "get_weather_forecast": 3}


@pytest.mark.parametrize(
    "text",
    [
        "my cat is sick, what should I feed her?",  # prose
        "show the diff between the two budgets",  # a common word, no cue
        "search for a cheap flight",
        "use a cat to catch mice",  # "use" is not right before the word
        "use log out to leave",  # a one-word name is not spelled across spaces
    ],
)
def test_a_one_word_name_in_prose_names_nothing(text: str) -> None:
    assert names(text, FS) == set()


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("run diff on a.txt and b.txt", "diff"),
        ("use cat to print notes.txt", "cat"),
        ("which command changes folders? the cd command", "cd"),
        ("print it with `cat`", "cat"),
        ("call cat('notes.txt')", "cat"),
        ("Search", "search"),  # a find_tools search that is just the name
        ("the search tool please", "search"),
    ],
)
def test_a_cued_one_word_name_names_its_tool(text: str, tool: str) -> None:
    assert names(text, FS) == {tool}


def test_names_glued_differently_still_match() -> None:
    catalog = [Candidate("get-36kr-trending", "get-36kr-trending", "Trending on 36Kr.")]
    for text in ("get36KrTrending now", "Use Get-36Kr-Trending to do this.", "get 36kr trending"):
        assert names(text, catalog) == {"get-36kr-trending"}, text


def test_a_one_word_name_is_not_glued_from_two_words() -> None:
    catalog = [Candidate("mean", "mean", "Mean of numbers."), Candidate("logout", "logout", "Log out.")]
    assert names("use log out now", catalog) == set()
    assert names("Give me an update on the stock, the tool can wait", catalog) == set()
    assert names("run logout", catalog) == {"logout"}
    assert names("call Mean(1, 2)", catalog) == {"mean"}


def test_the_cue_word_does_not_make_a_second_name() -> None:
    catalog = [Candidate("ApexMap", "ApexMap", "Apex maps."), Candidate("MapTool", "MapTool", "Maps.")]
    assert names("I need the apex_map tool here.", catalog) == {"ApexMap"}


def test_namespaced_tools_are_named_by_their_local_name() -> None:
    catalog = [
        Candidate("mcp__github__create_issue", "mcp__github__create_issue", "Open an issue."),
        Candidate("Hotels.SearchHotel", "Hotels.SearchHotel", "Find hotels."),
    ]
    assert names("please create_issue for the bug", catalog) == {"mcp__github__create_issue"}
    assert names("SearchHotel in Paris", catalog) == {"Hotels.SearchHotel"}


def test_empty_and_nameless_queries() -> None:
    assert names("", FS) == set()
    assert names("!!! ???", FS) == set()
    assert named_tools("get_weather", NameIndex.build([])) == {}


def test_spellings() -> None:
    assert spellings("get_weather") == ("get_weather", "getWeather", "get weather", "Get-Weather", "get.weather")
    assert spellings("cat") == ("cat", "Cat", "CAT", "`cat`")
    assert spellings("___") == ()
    assert name_words("HTTPServer") == ("http", "server")
    assert local_name("mcp__srv__read_file") == "read_file"
    assert local_name("Hotels.SearchHotel") == "SearchHotel"
    assert local_name("plain") == "plain"


def generated_catalog() -> list[Candidate]:
    """Short plain tools, verbose distractors and near-twins, in several naming styles."""
    return [
        *FS,
        *VERBOSE,
        Candidate("mcp__fs__read_file", "mcp__fs__read_file", "Read a file from disk."),
        Candidate("fetchURL", "fetchURL", "Fetch a URL and return the page body."),
        Candidate("Buses.FindBus", "Buses.FindBus", "Find a bus between two cities."),
        Candidate("get-9to5mac-news", "get-9to5mac-news", "Latest news from 9to5Mac."),
        Candidate("timeport", "timeport", "Travel through history in an immersive story."),
    ]


def test_generated_naming_queries_rank_the_named_tool_first() -> None:
    catalog = generated_catalog()
    ranker = HybridRanker(embedder=HashEmbedder(), name_match=True)
    pairs = naming_queries(catalog, every_spelling=True)
    assert len(pairs) > 4 * len(catalog)
    misses = [(t, tid) for t, tid in pairs if ranker.select(Query(t, k=5), catalog).selected[0] != tid]
    assert misses == []


def test_without_the_fast_path_verbose_distractors_win() -> None:
    catalog = generated_catalog()
    text = "run diff to compare the two project files versions"
    plain = HybridRanker(embedder=HashEmbedder(), name_match=False).select(Query(text, k=3), catalog).selected
    assert "diff" not in plain[:1]
    named = HybridRanker(embedder=HashEmbedder(), name_match=True).select(Query(text, k=3), catalog)
    assert named.selected[0] == "diff"


def test_a_named_tool_is_never_abstained_on() -> None:
    ranker = HybridRanker(embedder=HashEmbedder(), name_match=True, min_score=10.0)
    assert ranker.select(Query("use diff please", k=3), FS).selected[0] == "diff"
    assert ranker.select(Query("what is the meaning of life", k=3), FS).abstained


def test_the_fast_path_emits_an_event() -> None:
    seen: list[object] = []
    with event_hooks(seen.append):
        HybridRanker(embedder=HashEmbedder(), name_match=True).select(Query("call send_message", k=3), FS)
    events = [e for e in seen if getattr(e, "name", "") == "rankers.tools_named"]
    assert len(events) == 1 and events[0].ids == ("send_message",)  # type: ignore[attr-defined]
    assert events[0].level == logging.DEBUG  # type: ignore[attr-defined]


# -- near-duplicates ----------------------------------------------------------------------


def test_variants_of_one_tool_take_one_slot() -> None:
    catalog = [*VERBOSE, *FS]
    text = "get the project by name and version"
    plain = HybridRanker(embedder=HashEmbedder(), dedupe=False).select(Query(text, k=3), catalog).selected
    assert set(plain) == {c.id for c in VERBOSE}  # the three variants fill the top 3
    seen: list[object] = []
    with event_hooks(seen.append):
        deduped = HybridRanker(embedder=HashEmbedder()).select(Query(text, k=3), catalog)  # the default
    assert deduped.selected[0] == plain[0]
    assert len(set(deduped.selected) & {c.id for c in VERBOSE}) == 1
    assert len(deduped.selected) == 3
    demoted = [e for e in seen if getattr(e, "name", "") == "rankers.duplicates_demoted"]
    assert len(demoted) == 1 and len(demoted[0].ids) == 2  # type: ignore[attr-defined]


def test_demote_duplicates_rules() -> None:
    catalog = [
        Candidate("a.search", "a.search", "x"),
        Candidate("b.search", "b.search", "y"),
        Candidate("c.lookup", "c.lookup", "z"),
    ]
    index = NameIndex.build(catalog)
    # without vectors: the same local name is enough
    assert demote_duplicates([0, 1, 2], index, None) == ([0, 2, 1], [1])
    far = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    # same name, unrelated descriptions: distinct; a cosine of 1 under another name: distinct too
    assert demote_duplicates([0, 1, 2], index, far) == ([0, 1, 2], [])
    near = np.array([[1.0, 0.0], [0.9, 0.43589], [0.0, 1.0]], dtype=np.float32)  # cosine 0.9
    assert demote_duplicates([0, 1, 2], index, near) == ([0, 2, 1], [1])
    assert demote_duplicates([1, 0, 2], index, near) == ([1, 2, 0], [0])
    assert demote_duplicates([0, 1, 2], index, near, cosine=0.95) == ([0, 1, 2], [])
    assert demote_duplicates([], index, near) == ([], [])


def test_variants_by_version_and_by_identical_descriptions() -> None:
    catalog = [
        Candidate("p1", "get_project_v1", "Get a project."),
        Candidate("p2", "getProjectV2", "Fetch one project."),
        Candidate("q1", "list_projects", "List every project of the team."),
        Candidate("q2", "list_team_projects", "List every project of the team."),
        Candidate("g2l", "gallon_to_liter", "Convert gallon to liter."),
        Candidate("l2g", "liter_to_gallon", "Convert liter to gallon."),
        Candidate("r", "remove_user", "List every project of the team."),
    ]
    index = NameIndex.build(catalog)
    assert variants(0, 1, index, None)  # same name once the version is dropped
    assert variants(2, 3, index, None)  # same description, names share half their words
    assert not variants(4, 5, index, None)  # mirrored converters are distinct tools
    assert not variants(2, 6, index, None)  # same description, unrelated names
    identical = np.ones((len(catalog), 2), dtype=np.float32) / np.sqrt(2)
    assert not variants(4, 5, index, identical)  # a cosine of 1 does not make variants


def test_by_default_only_same_named_tools_are_variants() -> None:
    """Two tools a dataset tells apart by name keep their slots (NESTFUL's ``create_event`` and
    ``create_calendar_event`` share a description); one tool on two servers takes one."""
    same_words = "Create a new event in the calendar with a title, a start and an end time."
    catalog = [
        Candidate("create_event", "create_event", same_words),
        Candidate("create_calendar_event", "create_calendar_event", same_words),
        Candidate("mcp__files__read_file", "mcp__files__read_file", "Read the contents of a file from disk."),
        Candidate(
            "mcp__desktop__read_file", "mcp__desktop__read_file", "Read the contents of a file from disk, any size."
        ),
        Candidate("delete_file", "delete_file", "Delete a file from disk."),
    ]
    index = NameIndex.build(catalog)
    assert not variants(0, 1, index, None, descriptions=False) and variants(0, 1, index, None)
    assert variants(2, 3, index, None, descriptions=False)
    assert demote_duplicates([0, 1, 2, 3, 4], index, None, descriptions=False) == ([0, 1, 2, 4, 3], [3])
    ranker = HybridRanker(embedder=HashEmbedder())
    assert ranker.dedupe and not ranker.dedupe_descriptions
    events = set(ranker.select(Query("create an event in the calendar", k=2), catalog).selected)
    assert events == {"create_event", "create_calendar_event"}
    files = ranker.select(Query("read the contents of a file", k=2), catalog).selected
    assert len(set(files) & {"mcp__files__read_file", "mcp__desktop__read_file"}) == 1
    both = HybridRanker(embedder=HashEmbedder(), dedupe_descriptions=True)
    assert len(set(both.select(Query("create an event in the calendar", k=2), catalog).selected)) == 2
    assert both.select(Query("create an event in the calendar", k=2), catalog).selected[1] not in {
        "create_event",
        "create_calendar_event",
    }


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (
            ("mcp__files__read_file", "Read a file from disk."),
            ("mcp__desktop__read_file", "Read a file from the disk."),
            True,
        ),
        (("read_file", "Read a file from disk."), ("read_file_v2", "Read a file from disk, faster."), True),
        (
            ("mcp__bio__search", "Search biomedical literature and trials."),
            ("mcp__hn__search", "Search stories on Hacker News."),
            False,
        ),
        (("get_weather", "Weather of a city."), ("get_forecast", "Weather of a city."), False),
        (("v2", "Same words."), ("v3", "Same words."), False),  # no name left once versions go
        (("lookup", ""), ("x.lookup", ""), True),  # the same name and nothing to tell them apart
        (  # stems and stopwords aside, the same terms
            ("a.get_project", "Retrieve details of a project specified by its unique name and version."),
            (
                "b.get_project",
                "Retrieves a specific project's details by matching the provided project name and version.",
            ),
            True,
        ),
        (
            ("Dentist.BookAppointment", "Book an appointment at a dentist for a given time and date."),
            ("Salon.BookAppointment", "Book an appointment at a hair stylist."),
            False,
        ),
    ],
)
def test_same_tool_without_vectors(a: tuple[str, str], b: tuple[str, str], same: bool) -> None:
    ca, cb = Candidate(a[0], a[0], a[1]), Candidate(b[0], b[0], b[1])
    assert same_tool(ca, cb) is same and same_tool(cb, ca) is same
    assert same_tool(ca, ca)
    assert variant_key("mcp__files__Read_File_v2") == ("read", "file")


# -- servers ------------------------------------------------------------------------------


def test_group_keys() -> None:
    assert candidate_group(Candidate("t", "t", "", metadata={"server": "github"})) == "server:github"
    assert (
        candidate_group(Candidate("t", "t", "", metadata={"suite": "GorillaFileSystem"})) == "suite:GorillaFileSystem"
    )
    assert candidate_group(Candidate("mcp__gh__create_issue")) == "ns:gh"
    assert candidate_group(Candidate("gh__create_issue")) == "ns:gh"
    assert candidate_group(Candidate("Hotels.SearchHotel")) == "dot:Hotels"
    assert candidate_group(Candidate("get_weather")) is None
    assert candidate_group(Candidate("t", "t", "", metadata={"server": "  "})) is None
    # shortlist's adapters set ``namespace`` to a kind ("mcp", "skill"), not a server
    assert candidate_group(Candidate("t", "t", "", metadata={"namespace": "mcp"})) is None
    assert candidate_group(Candidate("t", "t", "", metadata={"server": "gh", "namespace": "mcp"})) == "server:gh"


def test_group_ids_say_nothing_without_shared_servers() -> None:
    assert group_ids([Candidate("a"), Candidate("b")]) is None  # no servers
    one = [Candidate(f"t{i}", metadata={"server": "s"}) for i in range(3)]
    assert group_ids(one) is None  # one server for all
    mixed = [*one, Candidate("x")]
    got = group_ids(mixed)
    assert got is not None and list(got) == [0, 0, 0, 1]


def test_server_scores_are_the_mean_of_the_best_tools() -> None:
    scores = np.array([0.9, 0.1, 0.5, 0.4, 0.3])
    groups = np.array([0, 0, 1, 1, 2], dtype=np.intp)
    np.testing.assert_allclose(server_scores(scores, groups, top=1), [0.9, 0.9, 0.5, 0.5, 0.3])
    np.testing.assert_allclose(server_scores(scores, groups, top=2), [0.5, 0.5, 0.45, 0.45, 0.3])
    np.testing.assert_allclose(server_scores(scores, groups, top=5), [0.5, 0.5, 0.45, 0.45, 0.3])


def test_server_evidence_lifts_the_tools_of_the_likely_server() -> None:
    catalog = [
        Candidate("create_document", "create_document", "Create a new Word document.", metadata={"server": "word"}),
        Candidate("add_paragraph", "add_paragraph", "Add a paragraph to a document.", metadata={"server": "word"}),
        Candidate("add_picture", "add_picture", "Insert an image.", metadata={"server": "word"}),
        Candidate("paint", "paint", "Draw a picture image on a canvas.", metadata={"server": "art"}),
        Candidate("sketch", "sketch", "Sketch an image.", metadata={"server": "art"}),
    ]
    text = "create a word document and insert an image"
    plain = HybridRanker(embedder=HashEmbedder(), server_weight=0).score(Query(text), catalog)
    lifted = HybridRanker(embedder=HashEmbedder(), server_weight=0.5, server_top=1).score(Query(text), catalog)
    # add_picture shares the best tool's server: it gains more than the art tools
    gain = lifted - plain
    assert gain[2] > gain[3] and gain[2] > gain[4]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"server_weight": -0.1}, "server_weight"),
        ({"server_top": 0}, "server_top"),
        ({"dedupe_cosine": 0.0}, "dedupe_cosine"),
        ({"dedupe_cosine": 1.5}, "dedupe_cosine"),
    ],
)
def test_bad_lever_options(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HybridRanker(embedder=HashEmbedder(), **options)  # type: ignore[arg-type]


# -- names as vectors, server centroids, caching ------------------------------------------


def test_a_short_tool_is_matched_by_its_name_alone() -> None:
    catalog = [
        Candidate("diff", "diff", "x"),
        Candidate("long", "compare_project_versions", "y " * 50),
    ]
    plain = HybridRanker(embedder=HashEmbedder()).score(Query("diff"), catalog)
    named = HybridRanker(embedder=HashEmbedder(), name_vector=1.0).score(Query("diff"), catalog)
    assert named[0] >= plain[0] and named[1] == pytest.approx(plain[1])
    half = HybridRanker(embedder=HashEmbedder(), name_vector=0.5).score(Query("diff"), catalog)
    assert plain[0] <= half[0] <= named[0]


def test_the_name_vector_leaves_the_confidence_as_written() -> None:
    plain = HybridRanker(embedder=HashEmbedder(), min_score=-1.0)
    named = HybridRanker(embedder=HashEmbedder(), min_score=-1.0, name_vector=1.0)
    q = Query("get weather in Oslo")
    np.testing.assert_allclose(plain.score_with_confidence(q, FS)[1], named.score_with_confidence(q, FS)[1])


def test_server_centroid_lifts_the_server_nearest_the_query() -> None:
    catalog = [
        Candidate("a1", "a1", "weather forecast rain", metadata={"server": "weather"}),
        Candidate("a2", "a2", "weather wind temperature", metadata={"server": "weather"}),
        Candidate("b1", "b1", "stock price quote", metadata={"server": "finance"}),
        Candidate("b2", "b2", "stock dividend history", metadata={"server": "finance"}),
    ]
    q = Query("weather tomorrow")
    plain = HybridRanker(embedder=HashEmbedder(), server_weight=0).score(q, catalog)
    lifted = HybridRanker(embedder=HashEmbedder(), server_weight=0, server_centroid=0.5).score(q, catalog)
    gain = lifted - plain
    assert min(gain[:2]) > max(gain[2:])


def test_structure_is_cached_per_catalog_and_rebuilt_for_a_new_embedder() -> None:
    embedder = HashEmbedder()
    ranker = HybridRanker(embedder=embedder, name_vector=0.9)
    catalog = tuple(FS)
    ranker.score(Query("weather"), catalog)
    calls = embedder.calls
    ranker.score(Query("files"), catalog)
    assert embedder.calls == calls + 1  # the query only; names are not embedded again
    from shortlist.selection._base import SelectorContext

    other = HashEmbedder(dim=64)
    ranker.init(SelectorContext(embeddings=other))
    ranker.score(Query("weather"), catalog)
    assert other.calls >= 3  # catalog, names, query on the new embedder


def test_name_vector_option_range() -> None:
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="name_vector"):
            HybridRanker(embedder=HashEmbedder(), name_vector=bad)
    with pytest.raises(ValueError, match="server_centroid"):
        HybridRanker(embedder=HashEmbedder(), server_centroid=-1.0)


def test_server_scores_over_a_layout_and_ties() -> None:
    groups = np.array([0, 0, 0, 1], dtype=np.intp)
    layout = GroupLayout.of(groups)
    scores = np.array([0.5, 0.5, 0.2, 0.9])
    # equal scores inside a group count once among its best
    np.testing.assert_allclose(server_scores(scores, layout, top=2), [0.35, 0.35, 0.35, 0.9])
    np.testing.assert_allclose(server_scores(scores, groups, top=1), [0.5, 0.5, 0.5, 0.9])
    assert server_scores(np.zeros(0), np.zeros(0, dtype=np.intp), top=3).size == 0


def test_warm_builds_the_structure() -> None:
    embedder = HashEmbedder()
    ranker = HybridRanker(embedder=embedder, name_vector=0.9)
    catalog = tuple(FS)
    ranker.warm(catalog)
    calls = embedder.calls
    ranker.score(Query("weather"), catalog)
    assert embedder.calls == calls + 1  # only the query


# -- quoted payloads --------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Post 'Meeting moved to 3pm, see you all' to my feed", "Post something to my feed"),
        ('Create "final_report.pdf" in the temp folder', "Create a file in the temp folder"),  # its kind stays
        ("Send \u201cok\u201d and \u2018thanks\u2019 to Bob", "Send something and something to Bob"),
        ("Is 'x' in 'y z'?", "Is something in something ?"),
        ("I'm sure the users' files are fine", "I'm sure the users' files are fine"),  # apostrophes
        ("'cat'", "'cat'"),  # nothing but a quote: kept as written
        ("show 'a'", "show 'a'"),  # one word of its own would remain: kept
    ],
)
def test_without_quoted_drops_the_payload(text: str, expected: str) -> None:
    assert without_quoted(text) == expected


@pytest.mark.parametrize(
    ("span", "kind"),
    [
        ("'final_report.pdf'", "a file"),
        ("'~/docs/notes.v2.md'", "a file"),
        ("\u201c/home/user/docs\u201d", "a folder"),
        ("'docs/'", "a folder"),
        ("'src/shortlist/rankers'", "a folder"),
        ("'and/or'", "something"),  # two words with a slash are not a path
        ("'john.doe@example.com'", "an email address"),
        ("'https://example.com/a?b=1'", "a web address"),
        ("'www.example.org'", "a web address"),
        ("'1,250.50'", "a number"),
        ("'1234567890'", "a number"),  # bare digits: nothing says they are a phone number
        ("'10:30'", "a time"),
        ("'6:45 pm'", "a time"),
        ("'2022-12-31'", "a date"),
        ("'2022-12-01 10:00'", "a date"),
        ("'12/31/2024'", "a date"),  # not a folder
        ("'123-456-7890'", "a phone number"),
        ("'(555) 123-4567'", "a phone number"),
        ("'+1 415 555 2671'", "a phone number"),
        ("'+14155552671'", "a phone number"),
        ("'500-1000'", "a number"),  # a range as often as a local phone number
        ("'2022-12'", "a number"),  # no day: not a date
        ("'-'", "something"),  # no digit: not a number
        ("'Weekly Meeting'", "something"),
        ("'U.S.'", "something"),  # no extension after the last dot
        ("'USR007'", "something"),
    ],
)
def test_a_dropped_quote_keeps_its_kind(span: str, kind: str) -> None:
    assert quoted_kind(span) == kind
    assert without_quoted(f"please use {span} now") == f"please use {kind} now"


def _quotes_kept_and_dropped(text: str, catalog: list[Candidate]) -> tuple[Scores, Scores]:
    """``text``'s scores over ``catalog`` with its quotes kept, and dropped (the default)."""
    kept = HybridRanker(embedder=HashEmbedder(), server_weight=0, drop_quoted=False).score(Query(text), catalog)
    return kept, HybridRanker(embedder=HashEmbedder(), server_weight=0).score(Query(text), catalog)


def test_drop_quoted_ranks_by_the_request_not_its_payload() -> None:
    catalog = [
        Candidate("create_ticket", "create_ticket", "Create a support ticket."),
        Candidate("logout", "logout", "Log out of the account and sync the session."),
    ]
    text = "Please file a support ticket saying 'I log out and back in but my account does not sync the session'"
    kept, dropped = _quotes_kept_and_dropped(text, catalog)
    assert kept[1] > kept[0]  # the payload's words pull the wrong tool
    assert dropped[0] > dropped[1]


def test_a_tool_named_in_quotes_still_ranks_first() -> None:
    ranker = HybridRanker(embedder=HashEmbedder(), drop_quoted=True)
    # the quoted span leaves the ranking text, not the name check
    ranked = ranker.select(Query("please run 'get_weather_forecast' for the city of Oslo"), FS).selected
    assert ranked[0] == "get_weather_forecast"


def test_a_quoted_file_name_asks_for_a_file_tool_not_for_its_subject() -> None:
    catalog = [
        Candidate("summarize_project", "summarize_project", "Write the summary report of a project."),
        Candidate("touch", "touch", "Create a new empty file in the current directory."),
    ]
    kept, dropped = _quotes_kept_and_dropped("Please draft 'project_summary_report.txt' for me", catalog)
    assert kept[0] > kept[1]  # the file name's words pull the tool about its subject
    assert dropped[1] > dropped[0]  # "draft a file": the kind of the payload is the evidence
