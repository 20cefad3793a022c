"""The evaluation harness behind ``shortlist eval``: datasets, metrics, the runner, converters."""

from shortlist.eval.datasets import Dataset, EvalQuery, apply_train_examples, load_dataset, load_queries, load_tools
from shortlist.eval.metrics import mrr_at_k, ndcg_at_k, recall_at_k
from shortlist.eval.runner import abstention_curve, run_eval

__all__ = [
    "Dataset",
    "EvalQuery",
    "abstention_curve",
    "apply_train_examples",
    "load_dataset",
    "load_queries",
    "load_tools",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
    "run_eval",
]
