"""Hostile skill folders (issue 12): FIFOs, YAML bombs, oversized files, symlink races, forged index lines.

Events are matched by name (``skills.refused``, ``skills.resource_refused``) so that each test
fails on the behaviour it guards, not on an import.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shortlist.events import Event, event_hooks
from shortlist.skills import (
    SkillsCapability,
    SkillSource,
    SkillToolError,
    load_skill_set,
)

HANG_LIMIT_S = 5.0


def write_skill(folder: Path, name: str = "pdf-report", description: str = "Build PDF reports") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nDo it.\n", encoding="utf-8")
    return folder


def capability(root: Path) -> SkillsCapability:
    return SkillsCapability(load_skill_set([SkillSource.directory(root)]))


def run_bounded(fn: Callable[[], Any], *, release: Callable[[], None]) -> tuple[bool, BaseException | None, Any]:
    """Run ``fn`` in a thread for at most HANG_LIMIT_S; ``release`` unblocks it if it hangs.

    Returns (finished in time, the exception it raised, its result).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # reported to the test, not swallowed
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_LIMIT_S)
    finished = not thread.is_alive()
    if not finished:
        release()
        thread.join(HANG_LIMIT_S)
    return finished, box.get("error"), box.get("result")


def release_fifo(fifo: Path) -> Callable[[], None]:
    def release() -> None:  # a writer that opens and closes gives the blocked reader EOF
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        os.close(fd)

    return release


# ---------------------------------------------------------------- skill__read_resource: FIFOs and the symlink race


def test_fifo_resource_is_refused_without_hanging(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folder = write_skill(root / "pdf")
    fifo = folder / "pipe.md"
    os.mkfifo(fifo)
    cap = capability(root)
    events: list[Event] = []

    def read() -> Any:
        with event_hooks(events.append):
            return cap.read_resource("pdf-report", "pipe.md")

    finished, error, _ = run_bounded(read, release=release_fifo(fifo))
    assert finished, "skill__read_resource blocked on a FIFO"
    assert isinstance(error, SkillToolError) and "not a regular file" in str(error)
    refused = [e for e in events if e.name == "skills.resource_refused"]
    assert refused and refused[0].to_dict()["reason"] == "not_regular_file"


def test_swapping_a_subfolder_for_a_symlink_never_leaks_outside_content(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folder = write_skill(root / "pdf")
    (folder / "sub").mkdir()
    (folder / "sub" / "f.txt").write_text("inside", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE", encoding="utf-8")
    cap = capability(root)
    sub, parked = folder / "sub", folder / "sub-parked"
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(sub, parked)
            os.symlink(outside, sub)
            time.sleep(0)
            os.unlink(sub)
            os.rename(parked, sub)
            time.sleep(0)

    swapper = threading.Thread(target=swap, daemon=True)
    counts = {"inside": 0, "outside": 0, "refused": 0}
    swapper.start()
    deadline = time.monotonic() + 1.5
    try:
        while time.monotonic() < deadline:
            try:
                content = cap.read_resource("pdf-report", "sub/f.txt")["content"]
            except SkillToolError:
                counts["refused"] += 1
                continue
            counts["inside" if content == "inside" else "outside"] += 1
    finally:
        stop.set()
        swapper.join(5)
    assert counts["outside"] == 0, counts
    assert counts["inside"] > 0, counts  # the reads really ran against the real folder too


def test_relative_symlinks_inside_the_folder_still_resolve(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folder = write_skill(root / "pdf")
    (folder / "templates").mkdir()
    (folder / "templates" / "basic.md").write_text("# Basic\n", encoding="utf-8")
    os.symlink("templates/basic.md", folder / "alias.md")
    os.symlink("templates", folder / "tpl")
    os.symlink("../pdf/templates", folder / "loop-back")  # climbs to the skills root: refused
    os.symlink("self", folder / "self")
    cap = capability(root)
    assert cap.read_resource("pdf-report", "alias.md")["content"] == "# Basic\n"
    assert cap.read_resource("pdf-report", "tpl/basic.md")["content"] == "# Basic\n"
    assert cap.read_resource("pdf-report", "templates/../templates/basic.md")["content"] == "# Basic\n"
    with pytest.raises(SkillToolError, match="escapes"):
        cap.read_resource("pdf-report", "loop-back/basic.md")
    with pytest.raises(SkillToolError, match="symlinks"):
        cap.read_resource("pdf-report", "self")
