"""In-process rankers: BM25, embeddings, hybrid fusion, rerank, LLM judge."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.rankers._bm25 import Bm25Ranker
    from shortlist.rankers._embedding import EmbeddingRanker
    from shortlist.rankers._exec_client import ExecSelector
    from shortlist.rankers._hybrid import HybridRanker
    from shortlist.rankers._llm_judge import LlmJudgeRanker
    from shortlist.rankers._registry import SelectorRegistry
    from shortlist.rankers._rerank import RerankRanker
    from shortlist.rankers._timeout import TimeoutSelector
    from shortlist.rankers._wrappers import FallbackSelector

__all__ = [
    "Bm25Ranker",
    "EmbeddingRanker",
    "ExecSelector",
    "FallbackSelector",
    "HybridRanker",
    "LlmJudgeRanker",
    "RerankRanker",
    "SelectorRegistry",
    "TimeoutSelector",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "Bm25Ranker": "shortlist.rankers._bm25",
    "EmbeddingRanker": "shortlist.rankers._embedding",
    "ExecSelector": "shortlist.rankers._exec_client",
    "FallbackSelector": "shortlist.rankers._wrappers",
    "HybridRanker": "shortlist.rankers._hybrid",
    "LlmJudgeRanker": "shortlist.rankers._llm_judge",
    "RerankRanker": "shortlist.rankers._rerank",
    "SelectorRegistry": "shortlist.rankers._registry",
    "TimeoutSelector": "shortlist.rankers._timeout",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
