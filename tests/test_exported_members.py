"""The public surface, pinned (as httpx's test_exported_members): each public module's ``__all__`` is exactly the
list below, every name in it resolves without a warning, every module behind it is private, and the names a
subpackage exported before the surface was curated still resolve (until 0.2), with a DeprecationWarning that
says where they went.

Changing the public surface means changing this file: the diff is the review.
"""

from __future__ import annotations

import importlib
import pathlib
import types
import warnings

import pytest

from shortlist.errors import MissingDependencyError

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "shortlist"

EXPORTED: dict[str, list[str]] = {
    "shortlist": [
        "Candidate",
        "Event",
        "FunctionSelector",
        "NarrowingPolicy",
        "PinPolicy",
        "Query",
        "RuntimeConfig",
        "Selection",
        "Selector",
        "SelectorContext",
        "Shortlist",
        "ShortlistError",
        "TurnSelection",
        "add_event_hook",
        "anarrow",
        "event_hooks",
        "load_catalog",
        "load_runtime_config",
        "narrow",
        "remove_event_hook",
        "tool_tokens",
    ],
    "shortlist.adapters": [
        "candidates_from_tools",
        "render_tools",
        "to_anthropic_tool",
        "to_mcp_tool",
        "to_openai_responses_tool",
        "to_openai_tool",
    ],
    "shortlist.cli": ["main"],
    "shortlist.embeddings": ["DefaultEmbedder", "Embedder", "OpenAIEmbedder", "default_embedder"],
    "shortlist.enrichment": ["CatalogEnricher", "EnrichmentStore", "enrich_catalog"],
    "shortlist.errors": [
        "CallBudgetExhausted",
        "CatalogError",
        "ConfigError",
        "ContextBudgetError",
        "DocumentTooDeep",
        "EmbeddingError",
        "IndexIntegrityError",
        "Interrupted",
        "MCPServerError",
        "MemoryScopeError",
        "MemoryStoreCorrupt",
        "MemoryStoreFull",
        "MemoryStoreUnavailable",
        "MemoryValueError",
        "MessageFormatError",
        "MissingDependencyError",
        "ModelError",
        "ModelRequestBlocked",
        "OperationalError",
        "ReductionCancelled",
        "SelectorError",
        "SelectorProcessError",
        "SelectorProtocolError",
        "SelectorTimeout",
        "ShortlistError",
        "SkillToolError",
        "SummaryRejected",
        "UsageError",
    ],
    "shortlist.eval": ["Dataset", "load_dataset", "run_eval"],
    "shortlist.exec": ["PROTOCOL_VERSION", "request_schema", "response_schema"],
    "shortlist.feedback": ["FeedbackStore", "apply_examples"],
    "shortlist.integrations": ["ToolNarrower"],
    "shortlist.integrations.langchain": [
        "ShortlistMiddleware",
        "find_tools_tool",
        "narrowed_tools",
        "retrieve_tools_functions",
    ],
    "shortlist.integrations.llamaindex": ["ShortlistToolRetriever"],
    "shortlist.integrations.openai_agents": ["ShortlistModel", "ShortlistModelProvider"],
    "shortlist.integrations.pydantic_ai": ["ShortlistTools", "find_tools_tool", "prepare_tools"],
    "shortlist.mcp": ["MCPClient", "MCPServerSpec", "MCPToolSource", "select_mcp_tools"],
    "shortlist.memory": ["InMemoryStore", "Memory", "MemoryStore", "MemoryTools", "SqliteMemoryStore"],
    "shortlist.offer": [
        "OfferPolicy",
        "OfferState",
        "PRICE_PRESETS",
        "Prices",
        "ToolSession",
        "decide_offer",
        "search_tools",
    ],
    "shortlist.rankers": [
        "Bm25Ranker",
        "EmbeddingRanker",
        "ExecSelector",
        "FallbackSelector",
        "HybridRanker",
        "LlmJudgeRanker",
        "RerankRanker",
        "SelectorRegistry",
        "TimeoutSelector",
    ],
    "shortlist.reduction": [
        "ContextCompressor",
        "ContextFragment",
        "ReductionResult",
        "ReductionStage",
        "anthropic_from_fragments",
        "anthropic_to_fragments",
        "create_context_compressor",
        "newest_first_selector",
        "openai_from_fragments",
        "openai_to_fragments",
        "relevance_selector",
    ],
    "shortlist.retrieval": [
        "ContextRetriever",
        "CorpusRetriever",
        "Document",
        "EmbeddedBackend",
        "IndexBackend",
        "PostgresBackend",
        "QdrantBackend",
        "render_system_prompt",
    ],
    "shortlist.runtime": [
        "AnthropicMessagesModel",
        "CallableModel",
        "ChatModel",
        "Conversation",
        "OpenAIChatModel",
        "OpenAIResponsesModel",
        "Pack",
        "Tool",
        "TurnReport",
        "tool",
    ],
    "shortlist.selection": [],
    "shortlist.server": ["ServerSettings", "create_app"],
    "shortlist.skills": ["Skill", "SkillSet", "SkillSource", "SkillsCapability", "load_skill_set"],
    "shortlist.testing": [
        "FailingSelector",
        "HashEmbedder",
        "ScriptedModel",
        "SlowSelector",
        "StaticSelector",
        "allow_model_requests",
        "block_model_requests",
    ],
}


def _public_modules() -> list[str]:
    found = []
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if any(part.startswith("_") for part in parts if part != "__init__"):
            continue
        found.append(".".join(("shortlist", *(p for p in parts if p != "__init__"))))
    return sorted(found)


def _import(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except MissingDependencyError as exc:  # a framework integration without its extra (the core-only run)
        pytest.skip(str(exc))


def test_the_public_modules_are_the_pinned_ones() -> None:
    assert set(_public_modules()) - {"shortlist.data"} == set(EXPORTED)


def test_the_public_surface_stays_small() -> None:
    assert len(_public_modules()) <= 40
    assert sum(len(names) for names in EXPORTED.values()) <= 150


@pytest.mark.parametrize("module", sorted(EXPORTED))
def test_exported_members(module: str) -> None:
    mod = _import(module)
    assert sorted(mod.__all__) == EXPORTED[module]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in EXPORTED[module]:
            assert getattr(mod, name) is not None, name
    assert set(EXPORTED[module]) <= set(dir(mod))


@pytest.mark.parametrize("module", sorted(m for m in EXPORTED if m.count(".") <= 1))
def test_names_exported_before_warn_and_still_resolve(module: str) -> None:
    mod = _import(module)
    deprecated: dict[str, tuple[str, str | None]] = getattr(mod, "_DEPRECATED", {})
    for name, (defined_in, public) in deprecated.items():
        assert name not in EXPORTED[module]
        with pytest.warns(DeprecationWarning, match=rf"{module}\.{name} is deprecated and will be removed in 0\.2"):
            value = getattr(mod, name)
        assert value is getattr(importlib.import_module(defined_in), name)
        if public is not None:  # the new home exports the same object, not another of the same name
            assert name in EXPORTED[public], (name, public)
            assert getattr(importlib.import_module(public), name) is value, (name, public)


def test_an_unknown_name_is_an_attribute_error() -> None:
    import shortlist.rankers

    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        shortlist.rankers.Nope  # noqa: B018


@pytest.mark.slow  # a fresh interpreter's imports
def test_importing_a_package_imports_none_of_its_modules() -> None:
    import subprocess
    import sys

    code = (
        "import sys, shortlist.rankers, shortlist.offer;"
        " print(sorted(m for m in sys.modules if m.startswith('shortlist.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['shortlist._exports', 'shortlist.offer', 'shortlist.rankers']"
