"""The enrichment's model: what may be one (a ChatModel, a callable, ``module:attribute``), its name,
and reading a chat completion's text and token usage. Re-exported by :mod:`shortlist.enrichment._enricher`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from shortlist._loading import load_attribute
from shortlist.errors import ConfigError, ModelError
from shortlist.runtime._model import ChatModel

__all__ = ["PromptModel", "answer_text", "answer_usage", "model_name", "resolve_model"]

PromptModel = Callable[[str], str] | Callable[[str], Awaitable[str]]


def resolve_model(model: ChatModel | PromptModel | str) -> ChatModel | PromptModel:
    """The enrichment model: a ChatModel or callable as given, or loaded from ``module:attribute``.

    Raises:
        ConfigError: not loadable, or neither a ChatModel nor callable.
    """
    if isinstance(model, ChatModel) or callable(model):
        return model
    if not isinstance(model, str):
        raise ConfigError(f"the enrichment model must be a ChatModel, a callable or 'module:attribute', got {model!r}")
    target = load_attribute(model, what="the enrichment model (a ChatModel, a callable or 'module:attribute')")
    if not (isinstance(target, ChatModel) or callable(target)):
        raise ConfigError(f"enrichment model {model!r} is neither a ChatModel nor callable")
    resolved: ChatModel | PromptModel = target
    return resolved


def model_name(model: ChatModel | PromptModel) -> str:
    """The name a report gives the model (its ``model``, else its qualified name)."""
    if isinstance(model, ChatModel):
        return str(model.model)
    name = getattr(model, "model", None) or getattr(model, "__qualname__", None) or type(model).__qualname__
    return str(name)


def answer_text(body: Mapping[str, Any]) -> str:
    """The text of a chat completion's first choice.

    Raises:
        ModelError: the answer has none.
    """
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelError("the chat endpoint's answer has no choices[0].message.content") from exc
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    if not isinstance(content, str):
        raise ModelError(f"the chat endpoint's message content is {type(content).__name__}, not text")
    return content


def answer_usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(prompt, completion)`` tokens an answer reports, or None."""
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    p, c = (
        usage.get("prompt_tokens", usage.get("input_tokens")),
        usage.get("completion_tokens", usage.get("output_tokens")),
    )
    if isinstance(p, int) and isinstance(c, int) and p >= 0 and c >= 0:
        return p, c
    return None
