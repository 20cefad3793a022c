"""The evaluation harness behind ``shortlist eval``: datasets, metrics, the runner, converters."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.eval._datasets import Dataset, load_dataset
    from shortlist.eval._runner import run_eval

__all__ = [
    "Dataset",
    "load_dataset",
    "run_eval",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "Dataset": "shortlist.eval._datasets",
    "load_dataset": "shortlist.eval._datasets",
    "run_eval": "shortlist.eval._runner",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "EvalQuery": ("shortlist.eval._datasets", None),
    "abstention_curve": ("shortlist.eval._runner", None),
    "apply_train_examples": ("shortlist.eval._datasets", None),
    "load_queries": ("shortlist.eval._datasets", None),
    "load_tools": ("shortlist.eval._datasets", None),
    "mrr_at_k": ("shortlist.eval._metrics", None),
    "ndcg_at_k": ("shortlist.eval._metrics", None),
    "recall_at_k": ("shortlist.eval._metrics", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
