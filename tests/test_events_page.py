"""``docs/events.md`` lists exactly the events the package defines, with their name, area, level and fields."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import pkgutil
import re
from pathlib import Path

import pytest

import shortlist
from shortlist._events import Event

PAGE = Path(__file__).resolve().parents[1] / "docs" / "events.md"
ROW = re.compile(r"^\| `([\w.]+)` \| (\w+) \| (\w+) \| `([\w.]+)` \| (.*?) \| (.+) \|$")


def _import_every_module() -> set[str]:
    """Import every module of the package; return those that need an extra that is not installed."""
    unavailable = set()
    for info in pkgutil.walk_packages(shortlist.__path__, "shortlist."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # an optional extra that is not installed (the core-only CI run)
            if (exc.name or "").startswith("shortlist"):
                raise
            unavailable.add(info.name)
    return unavailable


def _within(qualname: str, modules: set[str]) -> bool:
    """True when ``qualname`` lives in one of ``modules`` or in a package among them."""
    return any(qualname.startswith(m + ".") for m in modules)


def _events(cls: type[Event] = Event) -> set[type[Event]]:
    found: set[type[Event]] = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("shortlist."):
            found |= {sub, *_events(sub)}
    return found


def _row(cls: type[Event]) -> tuple[str, str, str, str, str]:
    fields = dataclasses.fields(cls)
    default = next(f.default for f in fields if f.name == "level")
    assert isinstance(default, int), cls
    level = logging.getLevelName(default)
    names = ", ".join(f"`{f.name}`" for f in fields if f.name != "level") or "—"
    return cls.name, cls.area, level, f"{cls.__module__}.{cls.__qualname__}", names


def _documented() -> dict[str, tuple[str, str, str, str, str]]:
    rows: dict[str, tuple[str, str, str, str, str]] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m and m.group(1) != "name":
            assert m.group(6).strip(), f"{m.group(1)}: no line on when it is emitted"
            name, area, level, qualname, fields = m.group(1, 2, 3, 4, 5)
            rows[qualname] = (name, area, level, qualname, fields)
    return rows


@pytest.mark.slow  # imports every module of the package: seconds when it runs first
def test_every_event_is_listed_exactly() -> None:
    unavailable = _import_every_module()
    defined = {f"{c.__module__}.{c.__qualname__}": _row(c) for c in _events()}
    documented = {k: v for k, v in _documented().items() if not _within(k, unavailable)}
    missing = sorted(set(defined) - set(documented))
    assert not missing, "add to docs/events.md:\n" + "\n".join(
        "| `{}` | {} | {} | `{}` | {} | WHEN |".format(*defined[k]) for k in missing
    )
    assert sorted(set(documented) - set(defined)) == [], "docs/events.md lists events that no longer exist"
    for key, row in defined.items():
        assert documented[key] == row, f"docs/events.md is out of date for {key}: expected {row}"


def test_name_and_area_are_class_constants() -> None:
    _import_every_module()
    for cls in _events():
        fields = {f.name for f in dataclasses.fields(cls)}
        assert not fields & {"name", "area"}, f"{cls.__qualname__}: write name/area as ClassVar[str] constants"
        assert cls.name != Event.name and cls.area != Event.area, cls.__qualname__


def test_names_are_unique() -> None:
    _import_every_module()
    names = [c.name for c in _events()]
    assert len(names) == len(set(names))


def test_to_dict_still_writes_name_and_area_first() -> None:
    from shortlist._events import SelectionFallback

    event = SelectionFallback(reason="timeout", selector="s")
    d = event.to_dict()
    assert list(d)[:3] == ["name", "area", "reason"]
    assert d["name"] == "selection.fallback" and d["area"] == "selection" and "level" not in d
