"""Learning from usage: a log of which tools the model called, turned into example queries."""

from shortlist.feedback.store import FeedbackStore, apply_examples

__all__ = ["FeedbackStore", "apply_examples"]
