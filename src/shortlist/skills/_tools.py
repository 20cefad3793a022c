"""The model-facing skill tools (progressive disclosure) and their per-conversation state.

A :class:`SkillsCapability` belongs to **one** conversation: it holds which skills are
active and this turn's narrowed index, and nothing else shares it (the immutable
:class:`~shortlist.skills._sources.SkillSet` may be shared). It offers three tools:

* ``skill__activate{name}`` → ``{"instructions", "added_tools"}``: ``added_tools`` is the
  skill's ``allowed-tools`` intersected with the pack's tools (the pack is the ceiling),
  sorted. Activating an active skill returns the same result again. Its description carries
  **this turn's** narrowed index (:meth:`SkillsCapability.begin_turn`).
* ``skill__deactivate{name}`` → ``{"removed_tools"}``: only the tools no other active skill
  still needs.
* ``skill__read_resource{skill_name, path}`` → ``{"skill_name", "path", "content"}``: reads a
  regular file of the skill's folder, walked component by component beneath the folder's
  descriptor (:func:`~shortlist.skills._files.open_beneath`); absolute paths, ``..`` escapes,
  symlinks that lead outside the folder, FIFOs and devices are refused.

**Decision — narrowed-out skills.** By default a skill that this turn's selector narrowed out
of the index may still be activated (as upstream does): the model may know it from an earlier
turn, and refusing would make a narrowing miss unrecoverable. ``enforce_narrowing=True``
refuses it (already-active skills stay re-activatable). See ``docs/skills-and-mcp.md``.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from shortlist._events import EventHook, emit
from shortlist._types import Candidate, Query, TurnSelection
from shortlist.errors import SkillToolError, UsageError
from shortlist.selection._base import Selector
from shortlist.selection._narrowing import NarrowingPolicy, is_wildcard, narrow
from shortlist.skills._events import SkillResourceRefused
from shortlist.skills._files import MAX_SYMLINKS, BeneathError, open_beneath
from shortlist.skills._index import skill_activate_description
from shortlist.skills._sources import SkillSet

__all__ = [
    "SKILL_ACTIVATE",
    "SKILL_DEACTIVATE",
    "SKILL_READ_RESOURCE",
    "SKILL_TOOL_NAMES",
    "SkillToolError",
    "SkillsCapability",
]

SKILL_ACTIVATE = "skill__activate"
SKILL_DEACTIVATE = "skill__deactivate"
SKILL_READ_RESOURCE = "skill__read_resource"
SKILL_TOOL_NAMES = (SKILL_ACTIVATE, SKILL_DEACTIVATE, SKILL_READ_RESOURCE)

#: Resources larger than this are refused by ``skill__read_resource``.
DEFAULT_MAX_RESOURCE_BYTES = 256 * 1024
#: The longest ``path`` ``skill__read_resource`` accepts (Linux's ``PATH_MAX``).
MAX_PATH_CHARS = 4096


def _object_schema(properties: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


class SkillsCapability:
    """Skills for one conversation: the three skill tools, their executors and the active set.

    Args:
        skills: the conversation's skills (shareable, immutable).
        pack_tools: the pack's tool names; ``mcp__srv__*`` style patterns are allowed. They are
            the ceiling of what activation can add.
        max_active: the most skills active at once (0: unlimited).
        enforce_narrowing: refuse to activate a skill that this turn's index left out.
        skill_filter: a glob matched against each skill's virtual path (and name); ``""``
            allows every skill, ``"none"`` blocks every activation.
        max_resource_bytes: the largest file ``skill__read_resource`` returns.

    Preloaded skills are activated at construction; a failure there (for example
    ``max_active``) is ignored, as upstream does, and the skill stays inactive.
    """

    def __init__(
        self,
        skills: SkillSet,
        *,
        pack_tools: Iterable[str] = (),
        max_active: int = 0,
        enforce_narrowing: bool = False,
        skill_filter: str = "",
        max_resource_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
    ) -> None:
        if max_active < 0:
            raise UsageError("max_active must be >= 0 (0 means unlimited)")
        self.skills = skills
        self.pack_tools: tuple[str, ...] = tuple(dict.fromkeys(pack_tools))
        self.max_active = max_active
        self.enforce_narrowing = enforce_narrowing
        self.skill_filter = skill_filter
        self.max_resource_bytes = max_resource_bytes
        self._lock = threading.RLock()
        self._active: dict[str, tuple[str, ...]] = {}  # name -> its added tools, in activation order
        self._turn: TurnSelection | None = None
        for name in sorted(skills.preload):
            try:
                self.activate(name)
            except SkillToolError:
                continue

    # ---------------------------------------------------------------- turn index

    def candidates(self) -> list[Candidate]:
        """The skills as ``kind="skill"`` candidates (what a selector ranks)."""
        return self.skills.candidates()

    def begin_turn(self, turn: TurnSelection | None) -> None:
        """Use ``turn`` (a ``kind="skill"`` narrowing) as this turn's index; None shows every skill.

        Raises:
            ValueError: ``turn`` is not a skill narrowing.
        """
        if turn is not None and turn.query.kind != "skill":
            raise UsageError(f"the skill index needs a kind='skill' narrowing, got kind={turn.query.kind!r}")
        with self._lock:
            self._turn = turn

    def narrow_index(
        self,
        selector: Selector | None,
        text: str,
        *,
        k: int = 0,
        policy: NarrowingPolicy | None = None,
        hooks: Sequence[EventHook] = (),
    ) -> TurnSelection:
        """Narrow the skill index for this turn's user text and make it the current index.

        An empty ``text`` falls back to the full index (it never keeps a previous turn's).
        """
        turn = narrow(selector, Query(text=text, kind="skill", k=k), self.candidates(), policy, hooks=hooks)
        self.begin_turn(turn)
        return turn

    def index(self) -> list[Candidate]:
        """The skills shown in this turn's index (every skill before the first turn)."""
        with self._lock:
            turn = self._turn
        if turn is None:
            return self.candidates()
        return sorted(turn.surfaced, key=lambda c: c.name)

    # ---------------------------------------------------------------- tool definitions

    def tools(self) -> list[Candidate]:
        """The three skill tools for this turn, as candidates with JSON-Schema parameters.

        Render them with :func:`~shortlist.adapters._tools.to_openai_tool` or
        :func:`~shortlist.adapters._tools.to_anthropic_tool`.
        """
        name_prop = {"type": "string", "description": "The skill's name, as listed in the index."}
        meta = {"namespace": "skill", "builtin": True}
        return [
            Candidate(
                id=SKILL_ACTIVATE,
                description=skill_activate_description(self.index()),
                parameters=_object_schema({"name": name_prop}, ["name"]),
                metadata=meta,
            ),
            Candidate(
                id=SKILL_DEACTIVATE,
                description="Deactivate an active skill and remove the tools only it needed.",
                parameters=_object_schema({"name": name_prop}, ["name"]),
                metadata=meta,
            ),
            Candidate(
                id=SKILL_READ_RESOURCE,
                description="Read a file bundled with a skill (a path relative to the skill's folder).",
                parameters=_object_schema(
                    {
                        "skill_name": name_prop,
                        "path": {"type": "string", "description": "Relative path inside the skill's folder."},
                    },
                    ["skill_name", "path"],
                ),
                metadata=meta,
            ),
        ]

    def execute(self, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run one skill tool call.

        Raises:
            SkillToolError: unknown tool, missing/invalid arguments, or the tool's own failure.
        """
        args = dict(arguments or {})

        def arg(key: str) -> str:
            value = args.get(key)
            if not isinstance(value, str) or not value:
                raise SkillToolError(f"{tool}: argument {key!r} must be a non-empty string")
            return value

        if tool == SKILL_ACTIVATE:
            return self.activate(arg("name"))
        if tool == SKILL_DEACTIVATE:
            return self.deactivate(arg("name"))
        if tool == SKILL_READ_RESOURCE:
            return self.read_resource(arg("skill_name"), arg("path"))
        raise SkillToolError(f"unknown skill tool {tool!r} (expected one of {', '.join(SKILL_TOOL_NAMES)})")

    # ---------------------------------------------------------------- state

    @property
    def active(self) -> tuple[str, ...]:
        """Active skill names, in activation order."""
        with self._lock:
            return tuple(self._active)

    @property
    def active_tools(self) -> tuple[str, ...]:
        """Tools added by the active skills (sorted, de-duplicated)."""
        with self._lock:
            return tuple(sorted({t for tools in self._active.values() for t in tools}))

    def _added_tools(self, allowed: Sequence[str]) -> tuple[str, ...]:
        concrete = [t for t in self.pack_tools if not is_wildcard(t)]
        patterns = [t for t in self.pack_tools if is_wildcard(t)]
        out: set[str] = set()
        for entry in allowed:
            if is_wildcard(entry):  # a skill pattern expands to the pack's concrete tools
                out.update(t for t in concrete if fnmatch.fnmatchcase(t, entry))
                out.update(p for p in patterns if p == entry)
            elif entry in concrete or any(fnmatch.fnmatchcase(entry, p) for p in patterns):
                out.add(entry)
        return tuple(sorted(out))

    def _filter_allows(self, name: str) -> bool:
        if self.skill_filter == "":
            return True
        if self.skill_filter == "none":
            return False
        vpath = self.skills.virtual_paths.get(name, name)
        return fnmatch.fnmatchcase(vpath, self.skill_filter) or fnmatch.fnmatchcase(name, self.skill_filter)

    def activate(self, name: str) -> dict[str, Any]:
        """Activate ``name``: ``{"instructions", "added_tools"}``.

        Raises:
            SkillToolError: unknown skill, blocked by the filter or by narrowing enforcement,
                or ``max_active`` reached.
        """
        skill = self.skills.get(name)
        if skill is None:
            raise SkillToolError(f"unknown skill {name!r}; call skill__activate with a name from the index")
        with self._lock:
            if name in self._active:
                return {"instructions": skill.instructions, "added_tools": list(self._active[name])}
            if not self._filter_allows(name):
                raise SkillToolError(f"skill {name!r} is not available in the current state")
            if self.enforce_narrowing and name not in {c.id for c in self.index()}:
                raise SkillToolError(f"skill {name!r} is not in this turn's skill index")
            if self.max_active and len(self._active) >= self.max_active:
                raise SkillToolError(
                    f"cannot activate {name!r}: {self.max_active} skill(s) already active "
                    f"({', '.join(self._active)}); deactivate one first"
                )
            added = self._added_tools(skill.allowed_tools)
            self._active[name] = added
        return {"instructions": skill.instructions, "added_tools": list(added)}

    def deactivate(self, name: str) -> dict[str, Any]:
        """Deactivate ``name``: ``{"removed_tools"}`` (tools no other active skill still needs).

        Raises:
            SkillToolError: the skill is not active.
        """
        with self._lock:
            if name not in self._active:
                raise SkillToolError(f"skill {name!r} is not active")
            tools = self._active.pop(name)
            still = {t for other in self._active.values() for t in other}
        return {"removed_tools": sorted(t for t in tools if t not in still)}

    def _refuse(self, skill_name: str, path: str, reason: str, message: str) -> SkillToolError:
        """Emit a :class:`SkillResourceRefused` event and return the error for the model."""
        emit(SkillResourceRefused(skill=skill_name, path=path, reason=reason, message=message))
        return SkillToolError(message)

    def read_resource(self, skill_name: str, path: str) -> dict[str, Any]:
        """Read ``path`` from the skill's folder: ``{"skill_name", "path", "content"}``.

        The path is walked beneath the folder one component at a time, each opened with
        ``O_NOFOLLOW`` relative to the directory before it (no check-then-use gap, so a
        subfolder swapped for a symlink mid-read cannot lead outside). Symlinks are followed
        only while they stay inside the folder: an absolute target or a ``..`` above the folder
        is an escape. The file is opened non-blocking and must be a regular file, so a FIFO
        never hangs the turn. Each refusal emits a :class:`SkillResourceRefused` event.

        Raises:
            SkillToolError: unknown skill, inline skill, absolute or escaping path, too many
                symlinks, missing file, not a regular file (directory, FIFO, device, socket),
                too large, or not UTF-8 text.
        """
        skill = self.skills.get(skill_name)
        if skill is None:
            raise self._refuse(skill_name, path, "unknown_skill", f"unknown skill {skill_name!r}")
        if skill.path is None:
            raise self._refuse(skill_name, path, "inline_skill", f"skill {skill_name!r} is inline and has no resources")
        if not path or "\x00" in path or len(path) > MAX_PATH_CHARS:
            raise self._refuse(
                skill_name,
                path[:MAX_PATH_CHARS],
                "invalid_path",
                f"path must be a non-empty relative path of at most {MAX_PATH_CHARS} characters",
            )
        rel = Path(path)
        if rel.is_absolute() or path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
            raise self._refuse(
                skill_name, path, "absolute", f"path {path!r} must be relative to the skill's folder, not absolute"
            )
        try:
            data = open_beneath(skill.path, path.split("/"), self.max_resource_bytes)
        except BeneathError as exc:
            raise self._refuse(skill_name, path, exc.reason, self._refusal_message(skill_name, path, exc)) from None
        if len(data) > self.max_resource_bytes:
            raise self._refuse(
                skill_name,
                path,
                "too_large",
                f"{path!r} of skill {skill_name!r} is larger than {self.max_resource_bytes} bytes",
            )
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise self._refuse(
                skill_name, path, "not_utf8", f"{path!r} of skill {skill_name!r} is not UTF-8 text"
            ) from None
        return {"skill_name": skill_name, "path": rel.as_posix(), "content": content}

    @staticmethod
    def _refusal_message(skill_name: str, path: str, exc: BeneathError) -> str:
        detail = f" ({exc.detail})" if exc.detail else ""
        if exc.reason == "escapes":
            return f"path {path!r} escapes the folder of skill {skill_name!r}{detail}"
        if exc.reason == "symlink_loop":
            return f"path {path!r} of skill {skill_name!r} follows more than {MAX_SYMLINKS} symlinks"
        if exc.reason == "missing":
            return f"skill {skill_name!r} has no file {path!r}{detail}"
        if exc.reason == "not_regular_file":
            return (
                f"{path!r} of skill {skill_name!r} is not a regular file "
                "(directories, FIFOs, devices and sockets are never read)"
            )
        if exc.reason == "changed":
            return f"{path!r} of skill {skill_name!r} changed while it was being opened; try again"
        return f"cannot read {path!r} of skill {skill_name!r}{detail}"
