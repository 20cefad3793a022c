"""PromptKit's exec-client request bytes, as Go's ``encoding/json`` writes them; regenerates the fixtures.

PromptKit (``runtime/selection/exec_client.go``) marshals ``execRequest{Query, Candidates}``:
the envelope's tags are lowercase (``query``, ``candidates``), but ``Query`` and ``Candidate``
have no tags, so their fields keep Go's names in declaration order (``Text, Kind, PackID,
AgentID, K`` and ``ID, Name, Description, Metadata``), nothing is omitted (an unset
``Metadata`` map is ``null``), ``<``, ``>`` and ``&`` are escaped as ``\\u003c``, ``\\u003e``,
``\\u0026``, U+2028/U+2029 as ``\\u2028``/``\\u2029``, and no newline follows. The tool path
(``stages_provider.go``) sends ``K: len(candidates)``; the skill path (``skills/executor.go``)
``K: 0``; neither sets ``PackID`` or ``AgentID``.

``python tests/exec/promptkit_payload.py`` rewrites ``tests/exec/data/promptkit_*.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
TOOLS_200 = DATA / "promptkit_tools_200.json"
SKILLS = DATA / "promptkit_skills.json"

TOOL_QUERY = "What's the weather in Paris & Lyon <tomorrow>? I need rain > 5mm alerts"
SKILL_QUERY = "Review my pull request <PR #42> & fix the failing tests"

_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def go_string(text: str) -> str:
    """A Go ``json.Marshal`` string literal (HTML escaping on, as ``json.Marshal`` always has)."""
    out = ['"']
    for ch in text:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ch in "<>&\u2028\u2029" or ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def request_bytes(text: str, kind: str, k: int, candidates: list[tuple[str, str]]) -> bytes:
    """``json.Marshal(execRequest{Query: {Text, Kind, K}, Candidates: [{ID, Name, Description}]})``."""
    query = f'{{"Text":{go_string(text)},"Kind":{go_string(kind)},"PackID":"","AgentID":"","K":{k}}}'
    items = ",".join(
        f'{{"ID":{go_string(i)},"Name":{go_string(i)},"Description":{go_string(d)},"Metadata":null}}'
        for i, d in candidates
    )
    return f'{{"query":{query},"candidates":[{items}]}}'.encode()


_SERVICES = (
    ("jira", "issue", "a Jira issue"),
    ("github", "pull_request", "a GitHub pull request"),
    ("slack", "message", "a Slack message"),
    ("gmail", "email", "an email in Gmail"),
    ("calendar", "event", "a calendar event"),
    ("drive", "file", "a file in Google Drive"),
    ("salesforce", "lead", "a Salesforce lead"),
    ("stripe", "invoice", "a Stripe invoice"),
    ("zendesk", "ticket", "a Zendesk support ticket"),
    ("notion", "page", "a Notion page"),
    ("hubspot", "contact", "a HubSpot contact"),
    ("shopify", "order", "a Shopify order"),
    ("s3", "bucket_object", "an object in an S3 bucket"),
    ("postgres", "row", "a row in a PostgreSQL table"),
    ("trello", "card", "a Trello card"),
    ("asana", "task", "an Asana task"),
    ("twilio", "sms", "an SMS sent with Twilio"),
    ("figma", "comment", "a comment on a Figma file"),
)
_ACTIONS = (
    ("create", "Create {what}."),
    ("get", "Fetch {what} by id, with all its fields."),
    ("update", "Update the fields of {what}."),
    ("delete", "Delete {what} permanently."),
    ("search", "Search for {what} matching a free-text query & filters."),
    ("list", "List recent items: each one is {what}."),
    ("archive", "Archive {what} so it no longer shows in default views."),
    ("comment_on", "Add a comment to {what}."),
    ("export", "Export {what} as CSV or JSON."),
)


def tool_catalog(n: int = 200) -> list[tuple[str, str]]:
    """``n`` tools: the 38 bundled example tools, then SaaS actions (``jira_create_issue``, ...)."""
    bundled = Path(__file__).parents[2] / "src" / "shortlist" / "data" / "example_tools.json"
    tools = [(t["function"]["name"], t["function"]["description"]) for t in json.loads(bundled.read_text())]
    for action, template in _ACTIONS:
        for service, noun, what in _SERVICES:
            tools.append((f"{service}_{action}_{noun}", template.format(what=what)))
    if len(tools) < n:
        raise ValueError(f"only {len(tools)} tools available")
    return tools[:n]


SKILL_CATALOG = [
    ("code-review", "Review a pull request: read the diff, point out bugs <and> style issues."),
    ("fix-tests", "Run the test suite, find failing tests & fix the code that breaks them."),
    ("write-docs", "Write or update Markdown documentation for a module."),
    ("release-notes", "Draft release notes from the merged pull requests since the last tag."),
    ("sql-migration", "Write a database migration (up & down) for a schema change."),
    ("incident-report", "Summarise an outage: timeline, impact, root cause, follow-ups."),
    ("translate-ui", "Translate user-interface strings into another language."),
    ("dependency-upgrade", "Upgrade a dependency and adapt the code to its breaking changes."),
    ("sprint-planning", "Plan a sprint: estimate stories and balance the team's capacity."),
    ("budget-forecast", "Forecast next quarter's budget from the spending so far."),
    ("social-post", "Write a short post for social media announcing a launch."),
    ("meeting-notes", "Turn a meeting transcript into notes with decisions & action items."),
    ("customer-email", "Answer a customer's email politely, in the company's tone."),
    ("data-cleaning", "Clean a CSV file: fix types, drop duplicates, fill missing values."),
]


def tool_request(n: int = 200) -> bytes:
    """The tool path's request: ``K = len(candidates)``."""
    return request_bytes(TOOL_QUERY, "tool", n, tool_catalog(n))


def skill_request() -> bytes:
    """The skill path's request: ``K = 0``."""
    return request_bytes(SKILL_QUERY, "skill", 0, SKILL_CATALOG)


if __name__ == "__main__":
    DATA.mkdir(exist_ok=True)
    TOOLS_200.write_bytes(tool_request())
    SKILLS.write_bytes(skill_request())
