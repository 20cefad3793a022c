"""Grounding for a turn: corpus documents and ambient memories, rendered into the system prompt.

Retrieval happens *before* the prompt is rendered (the reference retrieves after, and so
never injects). The blocks go where the template's ``{{memory_context}}`` / ``{{grounding}}``
slots are, or at its end when it has neither. A retriever or store failure is a
``retrieval.failed`` event; the turn goes on without that block.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shortlist.runtime.report import TurnReport

if TYPE_CHECKING:
    from shortlist.runtime.conversation import Pack

__all__ = ["Grounding"]


class Grounding:
    """Retrieve and render the grounding of one conversation's turns.

    Args:
        pack: the pack (its ``corpus``, ``memory``, ``scope`` and ``system_prompt``).
        budget_tokens: token budget of each injected block.
    """

    def __init__(self, pack: Pack, *, budget_tokens: int = 1000) -> None:
        self.pack = pack
        self.budget_tokens = budget_tokens

    async def arender(self, history: Sequence[dict[str, Any]], report: TurnReport) -> str:
        """Return the system prompt for this turn, with its grounding, and note what was injected."""
        if self.pack.corpus is None and self.pack.memory is None:
            return str(self.pack.system_prompt)
        from shortlist.retrieval.inject import gather_grounding, render_grounding

        found = await asyncio.to_thread(
            gather_grounding,
            retriever=self.pack.corpus,
            store=self.pack.memory,
            scope=self.pack.scope,
            messages=list(history),
        )
        report.documents = [
            {
                "id": m.metadata.get("document_id", m.id),
                "citation": m.metadata.get("citation_id"),
                "title": m.metadata.get("title"),
                "confidence": m.confidence,
            }
            for m in found.documents
        ]
        report.memories = [{"id": m.id, "type": m.type, "confidence": m.confidence} for m in found.memories]
        return render_grounding(
            str(self.pack.system_prompt),
            found,
            memory_budget_tokens=self.budget_tokens,
            grounding_budget_tokens=self.budget_tokens,
            append_missing=True,
        )
