"""Grounding for a turn: corpus passages and ambient memories, retrieved before the request is built.

Retrieval happens *before* the request is rendered (the reference retrieves after, and so
never injects). Where the delimited blocks go is the conversation's ``grounding_placement``:

* ``"history"`` (default): with the turn, as the first text part of its user message
  (:class:`~shortlist.runtime._context.HistoryWindow`), after the cached prefix; a passage or
  memory already in the history is not injected again, and the system prompt is the template
  with its ``{{memory_context}}`` / ``{{grounding}}`` slots empty, the same on every request.
* ``"system"``: rendered into the template's slots (or at its end when it has neither) on
  every turn, as the reference does; the system prompt then changes whenever the turn's
  grounding does, and the provider re-writes its cache from the system prompt on.

Both render with :func:`shortlist.retrieval._inject.render_blocks` (delimited, escaped, within
the token budget). A retriever or store failure is a ``retrieval.failed`` event; the turn goes
on without that block.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shortlist.errors import ConfigError
from shortlist.runtime._context import GROUNDING_PLACEMENTS, GroundingPlacement, InjectedContext
from shortlist.runtime._report import TurnReport

if TYPE_CHECKING:
    from shortlist._types import Candidate
    from shortlist.memory import Memory
    from shortlist.retrieval._inject import GroundingResult
    from shortlist.runtime._conversation import Pack

__all__ = ["Grounding"]


def _citation(m: Memory) -> str:
    return str(m.metadata.get("citation_id") or m.id)


class Grounding:
    """Retrieve and render the grounding of one conversation's turns.

    Args:
        pack: the pack (its ``corpus``, ``memory``, ``scope`` and ``system_prompt``).
        budget_tokens: token budget of each injected block.
        placement: ``"history"`` (with the turn, once) or ``"system"`` (in the system prompt).

    Raises:
        ConfigError: an unknown placement.
    """

    def __init__(self, pack: Pack, *, budget_tokens: int = 1000, placement: GroundingPlacement = "history") -> None:
        if placement not in GROUNDING_PLACEMENTS:
            raise ConfigError(f"grounding_placement must be 'history' or 'system', not {placement!r}")
        self.pack = pack
        self.budget_tokens = budget_tokens
        self.placement: GroundingPlacement = placement

    async def agather(self, history: Sequence[dict[str, Any]]) -> GroundingResult:
        """Retrieve this turn's passages and memories (nothing when the pack has neither source)."""
        from shortlist.retrieval._inject import GroundingResult, gather_grounding

        if self.pack.corpus is None and self.pack.memory is None:
            return GroundingResult()
        return await asyncio.to_thread(
            gather_grounding,
            retriever=self.pack.corpus,
            store=self.pack.memory,
            scope=self.pack.scope,
            messages=list(history),
        )

    def system_prompt(self, found: GroundingResult, report: TurnReport | None = None) -> str:
        """The system prompt: the template, with the turn's blocks under ``"system"`` placement, else empty slots."""
        from shortlist.retrieval._inject import GroundingResult, render_blocks, render_grounding

        template = str(self.pack.system_prompt)
        if self.placement == "history":
            return render_grounding(template, GroundingResult())
        if report is not None:
            held = render_blocks(
                found, memory_budget_tokens=self.budget_tokens, grounding_budget_tokens=self.budget_tokens
            ).held
            self._report(report, found, held, InjectedContext(""))
        return render_grounding(
            template,
            found,
            memory_budget_tokens=self.budget_tokens,
            grounding_budget_tokens=self.budget_tokens,
            append_missing=True,
        )

    def turn_context(
        self,
        found: GroundingResult,
        present: InjectedContext,
        skills: Sequence[Candidate],
        report: TurnReport,
    ) -> InjectedContext | None:
        """The context part of this turn's user message (``"history"`` placement), or None when nothing is new.

        Only what the history does not carry yet goes in: the skills of this turn's index not
        listed before, then the memories and passages not injected before (within the budgets).

        Args:
            found: what retrieval found this turn.
            present: what the history still carries (:meth:`HistoryWindow.present`).
            skills: this turn's skill index.
            report: the turn report (its ``documents`` and ``memories``).
        """
        from shortlist.retrieval._inject import GroundingResult, render_blocks
        from shortlist.skills._index import render_skill_index

        new = GroundingResult(
            tuple(m for m in found.memories if m.id not in present.memories),
            tuple(d for d in found.documents if _citation(d) not in present.documents),
        )
        blocks = render_blocks(new, memory_budget_tokens=self.budget_tokens, grounding_budget_tokens=self.budget_tokens)
        self._report(report, found, blocks.held, present)
        listed = [s for s in skills if s.name not in present.skills]
        parts = [render_skill_index(listed) if listed else "", blocks.memories, blocks.grounding]
        text = "\n\n".join(p for p in parts if p)
        if not text:
            return None
        return InjectedContext(
            text,
            documents=frozenset(_citation(d) for d in blocks.held.documents),
            memories=frozenset(m.id for m in blocks.held.memories),
            skills=frozenset(s.name for s in listed),
        )

    @staticmethod
    def _report(report: TurnReport, found: GroundingResult, held: GroundingResult, present: InjectedContext) -> None:
        docs = {_citation(d) for d in held.documents}
        mems = {m.id for m in held.memories}
        report.documents = [
            {
                "id": m.metadata.get("document_id", m.id),
                "citation": m.metadata.get("citation_id"),
                "title": m.metadata.get("title"),
                "confidence": m.confidence,
                "injected": _citation(m) in docs,
                "in_history": _citation(m) in present.documents,
            }
            for m in found.documents
        ]
        report.memories = [
            {
                "id": m.id,
                "type": m.type,
                "confidence": m.confidence,
                "injected": m.id in mems,
                "in_history": m.id in present.memories,
            }
            for m in found.memories
        ]
