"""Doubles for the reduction tests: a word counter, a scripted model, conversation builders."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from shortlist.reduction import ContextFragment
from shortlist.reduction._contract import ModelRequest


class WordCounter:
    """Deterministic counter: one token per whitespace-separated word."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


class ScriptedModel:
    """A deterministic model: returns (or raises) its scripted answers in order and records requests."""

    def __init__(self, *answers: Any, on_call: Callable[[ModelRequest], Any] | None = None) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []
        self.on_call = on_call

    async def __call__(self, request: ModelRequest) -> object:
        self.requests.append(request)
        if self.on_call is not None:
            result = self.on_call(request)
            if asyncio.iscoroutine(result):
                await result
        if not self.answers:
            raise AssertionError("the scripted model was called more often than scripted")
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def words(n: int, word: str = "w") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def agent_conversation(steps: int, result_words: int = 20) -> list[ContextFragment]:
    """system, first user turn, ``steps`` tool steps (call + result), final user turn."""
    frags = [
        ContextFragment(id="sys", kind="system", text="you are an agent"),
        ContextFragment(id="u0", kind="user", text="please start the task"),
    ]
    for i in range(steps):
        frags.append(ContextFragment(id=f"c{i}", step_id=f"s{i}", kind="tool_call", text=f"tool{i} arg"))
        frags.append(
            ContextFragment(id=f"r{i}", step_id=f"s{i}", kind="tool_result", text=words(result_words, f"r{i}x"))
        )
    frags.append(ContextFragment(id="u1", kind="user", text="what did you find"))
    return frags
