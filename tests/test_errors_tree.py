"""The exception tree drawn in ``shortlist.errors``' docstring is every ShortlistError the package defines."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import shortlist
from shortlist import errors
from shortlist.errors import ShortlistError


def _import_every_module() -> None:
    for info in pkgutil.walk_packages(shortlist.__path__, "shortlist."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # an optional extra that is not installed (the core-only CI run)
            if not (exc.name or "").startswith("shortlist"):
                continue
            raise


def _subclasses(cls: type[BaseException]) -> dict[str, str]:
    """Every subclass of ``cls`` defined by shortlist, as name -> the name of its ShortlistError parent."""
    found: dict[str, str] = {}
    for sub in cls.__subclasses__():
        if not sub.__module__.startswith("shortlist."):
            continue
        parent = next(b for b in sub.__mro__[1:] if issubclass(b, ShortlistError))
        found[sub.__name__] = parent.__name__
        found.update(_subclasses(sub))
    return found


def _drawn_tree() -> dict[str, str]:
    """The docstring's tree, as name -> parent name (from the depth of each line)."""
    lines = [line for line in (errors.__doc__ or "").splitlines() if re.match(r"^    [│ ]*[├└]── \w+", line)]
    parents = ["ShortlistError"]
    tree: dict[str, str] = {}
    for line in lines:
        m = re.match(r"^    ([│ ]*)[├└]── (\w+)", line)
        assert m, line
        depth = len(m.group(1)) // 4
        del parents[depth + 1 :]
        tree[m.group(2)] = parents[depth]
        parents.append(m.group(2))
    return tree


@pytest.mark.slow  # imports every module of the package (seconds on a cold interpreter)
def test_the_drawn_tree_lists_exactly_every_subclass() -> None:
    _import_every_module()
    assert _drawn_tree() == _subclasses(ShortlistError)


@pytest.mark.parametrize("name", sorted(_drawn_tree()))
def test_every_error_is_defined_in_errors(name: str) -> None:
    cls = getattr(errors, name)
    assert cls.__module__ == "shortlist.errors"
    assert name in errors.__all__


def test_old_import_paths_still_work() -> None:
    from shortlist.exec._protocol import DocumentTooDeep
    from shortlist.mcp._client import MCPServerError
    from shortlist.memory._sqlite import MemoryStoreCorrupt, MemoryStoreFull
    from shortlist.reduction._adapters import MessageFormatError
    from shortlist.reduction._compressor import SummaryRejected
    from shortlist.reduction._contract import CallBudgetExhausted, ReductionCancelled
    from shortlist.retrieval._backends.embedded import IndexIntegrityError
    from shortlist.runtime._model import ModelError
    from shortlist.skills._tools import SkillToolError

    assert DocumentTooDeep is errors.DocumentTooDeep and issubclass(DocumentTooDeep, ValueError)
    assert MemoryStoreFull is errors.MemoryStoreFull and MemoryStoreCorrupt is errors.MemoryStoreCorrupt
    assert IndexIntegrityError is errors.IndexIntegrityError and MessageFormatError is errors.MessageFormatError
    assert ModelError is errors.ModelError and MCPServerError is errors.MCPServerError
    assert SkillToolError is errors.SkillToolError and SummaryRejected is errors.SummaryRejected
    assert CallBudgetExhausted is errors.CallBudgetExhausted and ReductionCancelled is errors.ReductionCancelled


def test_postgres_reexports_the_same_classes() -> None:
    postgres = pytest.importorskip("shortlist.memory._postgres", exc_type=ImportError)
    assert postgres.MemoryStoreFull is errors.MemoryStoreFull
    assert postgres.MemoryStoreUnavailable is errors.MemoryStoreUnavailable


@pytest.mark.slow  # imports every module of the package
def test_no_error_carries_an_http_status() -> None:
    _import_every_module()
    for name in _subclasses(ShortlistError):
        cls = getattr(errors, name)
        assert not hasattr(cls, "status_code"), name


def test_an_operational_error_says_when_it_may_pass() -> None:
    assert errors.OperationalError("an extra is missing").retry_after is None  # retrying alone will not help
    assert errors.OperationalError("feedback database unavailable", retry_after=2).retry_after == 2.0
    assert errors.MemoryStoreUnavailable("memory database unavailable").retry_after == 1.0
    assert errors.MemoryStoreFull("disk full").retry_after is None  # the operator must act
    missing = errors.MissingDependencyError("pip install 'shortlist[postgres]'", name="psycopg")
    assert missing.name == "psycopg" and missing.retry_after is None  # still an ImportError, with its name
    assert str(errors.OperationalError("down", retry_after=1)) == "down"
