"""Abstention confidence that compares a query with requests that need no tool.

A cosine between a query and a tool description says how close they are, not whether *any*
tool is needed: "write a poem about the sea" is close to a poetry plugin and to nothing a tool
must do. :class:`AnchorConfidence` puts the catalog beside a fixed, shipped set of generic
"no tool needed" requests (:data:`NO_TOOL_ANCHORS`: writing, rewriting supplied text,
explaining, opinion, maths, trivia, advice, brainstorming, chit-chat, small coding help, role
play) and scores the query by how much more the tools attract it than those requests, a
softmax over tools and anchors at temperature ``tau`` read in cosine units::

    confidence = tau * log(sum_tools exp(cos / tau)) - tau * log(sum_anchors exp(cos / tau))

The anchors were written from general categories of assistant work, without reading any
evaluation set's no-tool queries, and nothing is fitted: ``tau`` is 0.05, the temperature the
embedding ranker's log-sum-exp over usage examples already uses. The anchors are embedded once
per process and embedder (one batch through the ranker's embedder, so its persistent vector
cache keeps them too); a turn costs one ``(anchors x dim)`` product on the query vector the
ranker already has. Measured in ``docs/evaluation.md`` (zero-shot abstention).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from shortlist.embeddings._base import Embedder
from shortlist.errors import UsageError
from shortlist.rankers._base import Scores

__all__ = [
    "DEFAULT_TAU",
    "NO_TOOL_ANCHORS",
    "AnchorConfidence",
    "ConfidenceKind",
    "log_sum_exp",
]

#: Which confidence a ranker abstains on: ``"anchors"`` (tools against :data:`NO_TOOL_ANCHORS`)
#: or ``"cosine"`` (the best cosine, plus the hybrid's weighted normalised BM25).
ConfidenceKind = Literal["anchors", "cosine"]

#: The softmax temperature (cosine units), the embedding ranker's example log-sum-exp one.
DEFAULT_TAU = 0.05

#: Generic requests an assistant answers without a tool, by category of assistant work.
NO_TOOL_ANCHORS: tuple[str, ...] = (
    "Write a short poem about the ocean at night.",
    "Write a haiku about autumn leaves.",
    "Compose a limerick about a cat who loves cheese.",
    "Write a bedtime story for a five-year-old about a brave little turtle.",
    "Draft a polite email to my landlord asking to fix the heating.",
    "Write a cover letter for a junior accountant position.",
    "Write a toast for my best friend's wedding.",
    "Help me write a thank-you note to my teacher.",
    "Write an essay introduction about the importance of sleep.",
    "Come up with a catchy slogan for a lemonade stand.",
    "Write song lyrics about missing home.",
    "Write a short science fiction story set on Mars.",
    "Draft a LinkedIn post announcing my new job.",
    "Write a birthday message for my grandmother.",
    "Write a product description for a handmade wooden bowl.",
    "Rewrite this paragraph to sound more professional: hey guys, the meeting got moved to friday.",
    "Fix the grammar in this sentence: me and him goes to the store yesterday.",
    "Summarize the following text in two sentences: "
    "The committee met on Tuesday and after a long debate agreed to postpone the vote.",
    "Make this email shorter and friendlier.",
    "Paraphrase this sentence so it does not sound plagiarized.",
    "Turn these bullet points into a flowing paragraph.",
    "Proofread my essay and point out any mistakes.",
    "Can you make this text more formal?",
    "Translate 'good morning, how are you?' into French.",
    "Rephrase this in simpler words for a child.",
    "Shorten this tweet so it fits the character limit.",
    "Give me a better title for this blog post.",
    "Explain how photosynthesis works.",
    "What is the difference between a virus and a bacterium?",
    "Explain quantum entanglement in simple terms.",
    "Why is the sky blue?",
    "How does a computer's memory work?",
    "Explain the concept of supply and demand.",
    "What does the term 'opportunity cost' mean?",
    "Can you explain what a metaphor is with an example?",
    "How do vaccines train the immune system?",
    "What causes the seasons on Earth?",
    "Explain recursion to a beginner programmer.",
    "What is the meaning of the word 'serendipity'?",
    "What do you think about pineapple on pizza?",
    "Is it better to read books or watch movies?",
    "What is your favorite color and why?",
    "Do you think artificial intelligence will replace teachers?",
    "What are the pros and cons of working from home?",
    "Which is more important, talent or hard work?",
    "Debate both sides of school uniforms.",
    "What is 17 times 23?",
    "Solve for x: 3x + 7 = 22.",
    "What is the square root of 144?",
    "If a train travels 60 miles in 1.5 hours, what is its average speed?",
    "What is 15 percent of 80?",
    "Prove that the sum of two even numbers is even.",
    "Convert 3/8 to a decimal.",
    "Here is a riddle: what has keys but cannot open locks?",
    "How many ways can I arrange the letters of the word 'cat'?",
    "Who wrote Pride and Prejudice?",
    "What is the capital of Australia?",
    "When did the Second World War end?",
    "Who painted the Mona Lisa?",
    "How many planets are in the solar system?",
    "What is the largest mammal on Earth?",
    "Who was the first person to walk on the moon?",
    "What language is spoken in Brazil?",
    "Tell me an interesting fact about octopuses.",
    "What is the boiling point of water in Fahrenheit?",
    "How can I become more confident when speaking in public?",
    "Give me some tips for falling asleep faster.",
    "How do I deal with a coworker who keeps interrupting me?",
    "What should I consider before adopting a dog?",
    "How can I stay motivated while studying?",
    "My friend is upset with me, how should I apologize?",
    "How do I prepare for a job interview?",
    "Any advice on managing stress during exams?",
    "How can I be a better listener?",
    "What are good habits for a healthy morning routine?",
    "Give me ideas for a fun team-building activity.",
    "Suggest names for my new puppy.",
    "Brainstorm themes for a sixth birthday party.",
    "What are some creative ways to reuse glass jars?",
    "Give me a few conversation starters for a first date.",
    "Suggest a plot twist for my mystery novel.",
    "Hello, how are you today?",
    "Thanks, that was really helpful!",
    "Good night!",
    "Tell me a joke.",
    "Can you tell me something funny?",
    "I'm bored, let's chat.",
    "Who are you?",
    "What can you do?",
    "I had a great day today.",
    "Ok, got it.",
    "Nice to meet you!",
    "Let's play a word game.",
    "Write a Python function that reverses a string.",
    "What is the difference between a list and a tuple in Python?",
    "Why does this code give an off-by-one error?",
    "Explain what a SQL join does.",
    "Write a regular expression that matches an email address.",
    "Pretend you are a pirate and describe your ship.",
    "Imagine you are a tour guide in ancient Rome.",
    "Help me think through whether I should change careers.",
    "Let's role-play a job interview; you be the interviewer.",
    "Describe what life might be like in the year 3000.",
)

_F32 = npt.NDArray[np.float32]

# (model name, anchor texts) -> vectors, shared by every ranker in the process.
_SHARED: dict[tuple[str, tuple[str, ...]], _F32] = {}
_SHARED_LOCK = threading.Lock()


def log_sum_exp(x: npt.ArrayLike, tau: float) -> float:
    """``tau * log(sum(exp(x / tau)))``, computed stably (``-inf`` for no entries)."""
    arr = np.asarray(x, dtype=np.float64).ravel()
    if arr.size == 0:
        return float("-inf")
    best = float(arr.max())
    return best + tau * float(np.log(np.exp((arr - best) / tau).sum()))


class AnchorConfidence:
    """Confidence that some candidate, rather than a generic no-tool request, fits the query.

    Args:
        anchors: the no-tool requests (default :data:`NO_TOOL_ANCHORS`); a deployment whose
            users ask other things without tools may give its own.
        tau: the softmax temperature, in cosine units.

    Raises:
        ValueError: no anchors, an empty anchor, or ``tau`` not positive.
    """

    def __init__(self, anchors: Sequence[str] | None = None, *, tau: float = DEFAULT_TAU) -> None:
        texts = tuple(NO_TOOL_ANCHORS if anchors is None else anchors)
        if isinstance(anchors, str):
            raise UsageError("anchors must be a sequence of texts, not one string")
        if not texts or any(not isinstance(t, str) or not t.strip() for t in texts):
            raise UsageError("anchors must be non-empty texts")
        if not tau > 0:
            raise UsageError("tau must be positive")
        self.anchors = texts
        self.tau = float(tau)
        self._lock = threading.Lock()
        self._own: tuple[Embedder, _F32] | None = None

    def vectors(self, embedder: Embedder, dim: int | None = None) -> _F32:
        """The anchors' unit vectors under ``embedder`` (embedded once per process and model).

        Args:
            embedder: the ranker's embedder.
            dim: the query vectors' size; vectors of another size are embedded again.
        """
        own = self._own
        if own is not None and own[0] is embedder and (dim is None or own[1].shape[1] == dim):
            return own[1]
        key = (str(getattr(embedder, "model_name", type(embedder).__name__)), self.anchors)
        with _SHARED_LOCK:
            vecs = _SHARED.get(key)
        if vecs is None or (dim is not None and vecs.shape[1] != dim):
            vecs = _unit(np.asarray(embedder.embed(list(self.anchors)), dtype=np.float32))
            with _SHARED_LOCK:
                _SHARED[key] = vecs
        with self._lock:
            self._own = (embedder, vecs)
        return vecs

    def anchor_score(self, qvec: npt.ArrayLike, embedder: Embedder) -> float:
        """How much the anchors attract the query: ``tau * log(sum(exp(cos / tau)))``."""
        q = np.asarray(qvec, dtype=np.float32).ravel()
        vecs = self.vectors(embedder, q.shape[0])
        norm = float(np.linalg.norm(q))
        sims = vecs @ (q / norm) if norm > 0 else np.zeros(vecs.shape[0], dtype=np.float32)
        return log_sum_exp(sims, self.tau)

    def confidence(self, scores: Scores, qvec: npt.ArrayLike, embedder: Embedder) -> Scores:
        """Per-candidate confidence: ``scores`` shifted so that their best is the tools' log-sum-exp
        less the anchors' (differences between candidates stay in the input's units, so
        ``min_margin`` keeps its meaning).

        Args:
            scores: one cosine-like score per candidate (the query as written).
            qvec: the query's vector.
            embedder: the embedder that made ``qvec`` (and embeds the anchors).
        """
        s = np.asarray(scores, dtype=np.float64)
        if s.size == 0:
            return s
        shift = log_sum_exp(s, self.tau) - float(s.max()) - self.anchor_score(qvec, embedder)
        return s + shift

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary (how many anchors, the temperature)."""
        return {"anchors": len(self.anchors), "tau": self.tau}


def _unit(x: _F32) -> _F32:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms > 0, norms, 1.0), dtype=np.float32)
