"""The built-in selector types, in one table: each type's factory and the strict model of its ``options:``.

:data:`BUILTIN_SELECTORS` maps a type name (``bm25``, ``hybrid``, ...) to a :class:`BuiltinSelector`:
the factory as a ``"module:attribute"`` string (nothing heavy is imported until the registry
builds one) and the options model the config checks when it loads. It sits on the foundation
floor, beside ``config``, because both the config (validation, JSON Schema) and the registry
(construction) read it; it imports no selector.

``runtime.yaml`` passes a built-in selector's ``options:`` mapping as keyword arguments to
its ranker's constructor.
Without a model, a typo'd key or a wrong value would only fail when the selector is first
built, long after the service reported ready. Each model here mirrors one constructor:
its fields are the constructor's keywords that YAML can express, with the same defaults,
types and ranges; the keywords that take Python objects or are set by the registry are
listed in :data:`NOT_OPTIONS`. ``tests/config/test_selector_options.py`` checks every model
against its constructor, so the two cannot drift apart.

Validation is strict: no coercion (``"8"`` is not an integer, ``1`` is not a boolean), except
that an integer is a valid number.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = [
    "BUILTIN_SELECTORS",
    "DEFAULT_SELECTOR",
    "NOT_OPTIONS",
    "AbstentionOptions",
    "Bm25Options",
    "BuiltinSelector",
    "EmbeddingOptions",
    "HybridBm25Options",
    "HybridEmbeddingOptions",
    "HybridOptions",
    "LexicalOptions",
    "LlmOptions",
    "OverlapOptions",
    "RerankOptions",
    "builtin_selector_names",
    "validate_options",
]

#: Constructor keywords that are not options: set by the registry (``name``) or Python
#: objects that YAML cannot express (``embedder`` comes from ``spec.embedding_providers``).
NOT_OPTIONS = frozenset({"name", "embedder", "transport"})

FirstStage = Literal["hybrid", "bm25", "embedding"]


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class AbstentionOptions(_Options):
    """``abstention:``: when a ranker answers "nothing fits" (:class:`~shortlist.rankers._base.Abstention`)."""

    min_score: float | None = None
    min_margin: float | None = None


class _TopK(_Options):
    top_k: int = Field(10, gt=0, description="how many to return when the query does not say")


class OverlapOptions(_TopK):
    """``type: overlap`` (:class:`~shortlist.rankers._lexical.TokenOverlapSelector`)."""


class LexicalOptions(_TopK):
    """``type: lexical`` (:class:`~shortlist.rankers._lexical.LexicalSelector`)."""


class HybridBm25Options(_Options):
    """``bm25:`` inside ``type: hybrid``: every BM25 option but ``top_k`` (the hybrid's own), with the
    defaults the hybrid gives its inner BM25 (normalised, examples field at
    ``bm25.FUSED_EXAMPLES_WEIGHT``) where they differ from ``type: bm25``'s."""

    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    stopwords: Literal["en", "en_plus", "none"] = "en_plus"
    stem: bool = True
    name_weight: int = Field(1, ge=0)
    examples_mode: Literal["field", "merge"] = "field"
    examples_weight: float = Field(1.0, ge=0)
    min_score: float | None = None
    min_margin: float | None = None
    adaptive_k: float | None = Field(None, gt=0, lt=1)
    normalize: bool = True
    cache_size: int = Field(4, ge=1)


class Bm25Options(HybridBm25Options, _TopK):
    """``type: bm25`` (:class:`~shortlist.rankers._bm25.Bm25Ranker`)."""

    examples_weight: float = Field(2.0, ge=0)
    normalize: bool = False


class HybridEmbeddingOptions(_Options):
    """``embedding:`` inside ``type: hybrid``: every embedding option but ``top_k``."""

    abstention: AbstentionOptions | None = None
    min_score: float | None = None
    min_margin: float | None = None
    adaptive_k: float | None = Field(None, gt=0, lt=1)
    use_examples: bool = True
    example_weight: float = Field(0.75, ge=0, le=1)
    example_top: int = Field(3, ge=1)
    example_aggregation: Literal["lse", "top_mean"] = "lse"
    example_tau: float = Field(0.065, gt=0)
    max_examples: int = Field(512, ge=1)
    vector_cache: str | None = None


class EmbeddingOptions(HybridEmbeddingOptions, _TopK):
    """``type: embedding`` (:class:`~shortlist.rankers._embedding.EmbeddingRanker`)."""


class HybridOptions(_TopK):
    """``type: hybrid`` (:class:`~shortlist.rankers._hybrid.HybridRanker`)."""

    fusion: Literal["zscore", "score", "rrf"] = "score"
    bm25_weight: float | None = Field(None, ge=0, description="default 0.35 with zscore, 0.2 with score, 1.0 with rrf")
    dense_weight: float = Field(1.0, ge=0)
    rrf_k: float = Field(60.0, gt=0)
    query_prefix: str = ""  # off by default; rankers.hybrid.USER_QUERY_PREFIX / TOOL_QUERY_PREFIX are measured
    decompose: bool | Literal["joints", "sentences"] = "joints"
    decompose_penalty: float = Field(0.1, ge=0)
    cover_intents: bool = False
    drop_quoted: bool = Field(True, description="rank by the query without its quoted spans (payloads)")
    abstention: AbstentionOptions | None = None
    min_score: float | None = None
    min_margin: float | None = None
    adaptive_k: float | None = Field(None, gt=0, lt=1)
    confidence_bm25_weight: float | None = Field(None, ge=0, description="0.5 with confidence cosine, 0 with anchors")
    confidence: Literal["anchors", "cosine"] = "cosine"
    confidence_anchors: list[str] | None = Field(None, min_length=1, description="no-tool requests (anchors)")
    adapter: str | None = Field(None, description="a query adapter file (shortlist feedback train --out)")
    adapter_weight: float = Field(0.5, ge=0, le=1)
    name_match: bool = Field(True, description="a tool the message names (any spelling) ranks first")
    dedupe: bool = Field(True, description="same-named variants of one tool take one slot of the top k")
    dedupe_cosine: float = Field(
        0.85, gt=0, le=1, description="description cosine at which same-named tools are variants"
    )
    dedupe_descriptions: bool = Field(False, description="tools with the same description are variants too")
    server_weight: float = Field(0.5, ge=0, description="weight of the tool's server score (0: off)")
    server_top: int = Field(3, ge=1, description="a server scores the mean of its best server_top tools")
    server_centroid: float = Field(0.0, ge=0, description="weight of the query's cosine to the server's mean tool")
    name_vector: float = Field(0.0, ge=0, le=1, description="a tool's cosine is at least this times its name's alone")
    bm25: HybridBm25Options | None = None
    embedding: HybridEmbeddingOptions | None = None


class RerankOptions(_TopK):
    """``type: rerank`` (:class:`~shortlist.rankers._rerank.RerankRanker`)."""

    url: str | None = None
    api_key: str | None = None
    api_key_env: str = "RERANK_API_KEY"
    model: str | None = None
    protocol: Literal["default", "cohere", "voyage", "tei"] = "default"
    first_stage: FirstStage = "hybrid"
    candidates_n: int = Field(50, ge=1)
    timeout_s: float = Field(2.5, gt=0)
    abstention: AbstentionOptions | None = None
    min_score: float | None = None
    min_margin: float | None = None


class LlmOptions(_TopK):
    """``type: llm`` (:class:`~shortlist.rankers._llm_judge.LlmJudgeRanker`)."""

    model: str | None = Field(None, pattern=r"^[\w.]+:[\w.]+$", description="the model callable as 'module:attribute'")
    first_stage: FirstStage = "hybrid"
    shortlist_n: int = Field(20, ge=1)
    top_k: int = Field(5, gt=0)
    max_output_chars: int = Field(2000, ge=1)
    description_chars: int = Field(300, ge=10)
    allow_model_requests: bool = False
    abstention: AbstentionOptions | None = None
    min_score: float | None = None
    min_margin: float | None = None


class BuiltinSelector(NamedTuple):
    """One built-in selector type: how to build it and what its ``options:`` may hold."""

    factory: str
    """``"module:attribute"``: called with ``name=`` plus the options."""
    options: type[BaseModel]
    """The strict model of its ``options:`` (checked when the config loads)."""


#: Every built-in selector type, in the order help texts list them.
BUILTIN_SELECTORS: dict[str, BuiltinSelector] = {
    "overlap": BuiltinSelector("shortlist.rankers._lexical:TokenOverlapSelector", OverlapOptions),
    "lexical": BuiltinSelector("shortlist.rankers._lexical:LexicalSelector", LexicalOptions),
    "bm25": BuiltinSelector("shortlist.rankers._bm25:Bm25Ranker", Bm25Options),
    "embedding": BuiltinSelector("shortlist.rankers._embedding:EmbeddingRanker", EmbeddingOptions),
    "hybrid": BuiltinSelector("shortlist.rankers._hybrid:HybridRanker", HybridOptions),
    "rerank": BuiltinSelector("shortlist.rankers._rerank:RerankRanker", RerankOptions),
    "llm": BuiltinSelector("shortlist.rankers._llm_judge:LlmJudgeRanker", LlmOptions),
}

#: The selector used when none is named (the best one measured; see README "Benchmarks").
DEFAULT_SELECTOR = "hybrid"


def builtin_selector_names() -> tuple[str, ...]:
    """Names of the built-in selector types."""
    return tuple(BUILTIN_SELECTORS)


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The nested options model at ``loc`` inside ``model`` (None if ``loc`` leaves the models)."""
    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        annotation = field.annotation
        args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
        nested = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def _message(type_name: str, model: type[BaseModel], err: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        key = str(loc[-1])
        owner = _model_at(model, loc[:-1])
        known = list(owner.model_fields) if owner is not None else []
        inside = f" in {loc[-2]!r}" if len(loc) > 1 else ""
        hint = difflib.get_close_matches(key, known, n=1)
        return f"unknown option {key!r}{inside} of selector type {type_name!r}" + (
            f"; did you mean {hint[0]!r}?" if hint else f"; known options: {', '.join(known)}"
        )
    msg = str(err["msg"]).removeprefix("Value error, ")
    owner = _model_at(model, loc[:-1]) if loc else None
    field = owner.model_fields.get(str(loc[-1])) if owner is not None else None
    about = f"; {loc[-1]}: {field.description}" if field is not None and field.description else ""
    shown = repr(err["input"])
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"{msg} (got {shown}{about})"


def validate_options(type_name: str, options: Mapping[str, Any]) -> None:
    """Check ``options`` against the model of the built-in selector type ``type_name``.

    Args:
        type_name: a key of :data:`BUILTIN_SELECTORS` (other types are not checked).
        options: the ``options:`` mapping of a selector.

    Raises:
        pydantic.ValidationError: every problem, located by its key path inside ``options``,
            with the fix in its message ("did you mean ...?" for a near-miss key).
    """
    builtin = BUILTIN_SELECTORS.get(type_name)
    if builtin is None:
        return
    model = builtin.options
    try:
        model.model_validate(dict(options))
    except ValidationError as exc:
        details = [
            InitErrorDetails(
                type=PydanticCustomError("selector_option", "{message}", {"message": _message(type_name, model, e)}),
                loc=tuple(e["loc"]),
                input=e["input"],
            )
            for e in exc.errors()
        ]
        raise ValidationError.from_exception_data(model.__name__, details) from None
