"""The README's callable model example runs as written, offline, and prints what it says; the
shapes docs/models.md documents are the ones the runtime sends and reads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from shortlist.runtime import Conversation, Pack, Tool

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _blocks(page: Path, start: str, end: str, lang: str) -> list[str]:
    text = page.read_text(encoding="utf-8")
    begin = text.index(start)
    part = text[begin : text.index(end, begin + len(start))]
    return [body for fence, body in _FENCE.findall(part) if fence == lang]


def test_the_readmes_callable_model_example_runs_offline() -> None:
    blocks = _blocks(ROOT / "README.md", "#### A model of your own", "## Configuration", "python")
    assert len(blocks) == 1 and "model=my_model" in blocks[0]
    printed: list[str] = []
    namespace: dict[str, Any] = {"print": lambda *a, **k: printed.append(" ".join(map(str, a)))}
    exec(compile(blocks[0], "README.md callable model", "exec"), namespace)
    comment = re.search(r"print\(result\.answer\)\s+# (.*)", blocks[0])
    assert comment is not None and printed == [comment.group(1)]
    assert [c.name for c in namespace["result"].report.tool_calls] == ["get_weather"]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_the_documented_shapes_are_what_the_runtime_sends_and_reads(fmt: str) -> None:
    """The request example of docs/models.md is the runtime's last request of the documented
    turn, and the response example is read as the tool call it shows."""
    blocks = [json.loads(b) for b in _blocks(ROOT / "docs" / "models.md", f'### `format="{fmt}"`', "###", "json")]
    documented_request, documented_response = blocks
    seen: list[dict[str, Any]] = []

    def get_weather(city: str) -> dict[str, str]:
        """Get the weather forecast for a city."""
        return {"city": city, "forecast": "sunny"}

    def model(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(json.loads(json.dumps(request)))
        if len(seen) == 1:
            return documented_response
        if fmt == "openai":
            return {"choices": [{"message": {"role": "assistant", "content": "Sunny."}}]}
        return {"content": [{"type": "text", "text": "Sunny."}]}

    pack = Pack(system_prompt="You are a travel assistant.", tools=[Tool.from_function(get_weather)])
    conv = Conversation(pack, model=model, format=fmt, tool_selector="lexical")  # type: ignore[arg-type]
    try:
        result = conv.send("Will it rain in Lisbon on Friday?")
    finally:
        conv.close()
    assert result.answer == "Sunny."
    assert seen[-1] == documented_request
