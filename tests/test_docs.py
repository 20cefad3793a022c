"""The README and docs/ work from a fresh clone.

Every relative link resolves (files and ``#anchors``); no path outside the repository and no
internal word appears where users read; every ``shortlist ...`` command of the README's shell
blocks (and of the docs' runnable ones) parses with the real parser; the quick start's first
command and its Python example run for real; the LICENSE is the Apache-2.0 text the package
metadata declares.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from shortlist.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
_LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
#: Words of the project's own process that mean nothing to a user.
INTERNAL = [
    r"\.\./shared/",
    r"/work/",
    r"\bseed \d{3}\b",
    r"\bthe seed('s)?\b",
    r"\bissue \d+\b",
    r"\bthe (Go )?reference\b(?! documents)",
    r"\bspec/[\w-]+\.md\b",
]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _without_code(text: str) -> str:
    return _FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _without_code(page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return _LINK.findall(_without_code(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if dest.is_relative_to(ROOT) is False:
            broken.append(f"{target}: outside the repository")
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {_rel(dest)}")
    assert broken == [], f"{_rel(page)}: {broken}"


def test_the_link_checker_sees_links_and_anchors() -> None:
    readme = ROOT / "README.md"
    assert "docs/evaluation.md#the-misses-and-the-html-report" in _links(readme)
    assert "the-misses-and-the-html-report" in _anchors(ROOT / "docs" / "evaluation.md")
    assert (
        _slug("A conversation's tools across replicas: `/v1/offer`") == "a-conversations-tools-across-replicas-v1offer"
    )


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_no_internal_words_or_paths_outside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for pattern in INTERNAL
        for m in re.finditer(pattern, text, re.I)
    ]
    assert found == [], f"{_rel(page)}: {found}"


def _shell_commands(page: Path) -> list[str]:
    """The ``shortlist ...`` commands of a page's bash blocks (comments dropped, ``&&`` chains split, an
    output redirection (``> FILE``) left to the shell)."""
    out = []
    for lang, body in _FENCE.findall(page.read_text(encoding="utf-8")):
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        for raw in body.replace("\\\n", " ").splitlines():
            for part in raw.split("&&"):
                if part.strip().startswith("shortlist "):
                    out.append(re.split(r"\s[12]?>{1,2}\s*\S+\s*$", part.strip())[0])
    return out


def _placeholder(command: str) -> bool:
    """A usage line (``[--k N]``, ``a|b``, ``...``, a loop's ``$d``) rather than a command to paste."""
    return bool(re.search(r"\[|\||\.\.\.|…|<[^>]*>|\$\w", shlex.join(shlex.split(command, comments=True))))


def test_every_readme_command_parses_with_the_real_parser() -> None:
    commands = _shell_commands(ROOT / "README.md")
    assert shlex.split(commands[0], comments=True) == ["shortlist", "select", "what's the weather in Paris tomorrow"]
    parser = build_parser()
    for command in commands:
        argv = shlex.split(command, comments=True)[1:]
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"README command does not parse (exit {exc.code}): {command}")


@pytest.mark.parametrize("page", sorted((ROOT / "docs").rglob("*.md")), ids=_rel)
def test_runnable_docs_commands_parse(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    bad = []
    for command in _shell_commands(page):
        if _placeholder(command):
            continue
        try:
            parser.parse_args(shlex.split(command, comments=True)[1:])
        except SystemExit:
            bad.append(command)
    capsys.readouterr()
    assert bad == [], f"{_rel(page)}: commands that do not parse: {bad}"


def test_the_quick_starts_first_command_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    first = _shell_commands(ROOT / "README.md")[0]
    assert main(shlex.split(first, comments=True)[1:]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("get_weather_forecast"), out


def test_the_quick_starts_python_runs_from_the_clone(monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start") : readme.index("## Concepts")]
    blocks = [body for lang, body in _FENCE.findall(quick) if lang == "python"]
    assert blocks and 'Shortlist("src/shortlist/data/example_tools.json")' in blocks[0]
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"print": lambda *a, **k: None}
    exec(compile(blocks[0], "README.md quick start", "exec"), namespace)
    turn, tools = namespace["turn"], namespace["tools"]
    assert isinstance(tools, list) and [t["function"]["name"] for t in tools] == list(turn.ids)  # type: ignore[attr-defined]
    assert turn.ids[0] == "search_flights"  # type: ignore[attr-defined]


def test_catalog_paths_in_examples_exist() -> None:
    for page in PAGES:
        for m in re.finditer(r"""(?:Shortlist|load_catalog)\(\s*["']([^"']+)["']""", page.read_text(encoding="utf-8")):
            assert (ROOT / m.group(1)).exists() or m.group(1).startswith("/"), (
                f"{_rel(page)}: {m.group(1)!r} is not in a fresh clone; point the example at a file of the "
                "repository (src/shortlist/data/example_tools.json, tests/data/...) or an absolute path"
            )


def test_license_is_apache_2_and_declared_for_the_wheel() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


def test_docs_import_only_public_names() -> None:
    """A snippet in the README or docs/ imports what the pinned public surface exports, never a private module."""
    from test_exported_members import EXPORTED  # the pinned surface (read, not imported: no module cost)

    wrong = []
    for path in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"from (shortlist(?:\.\w+)*) import (\([^)]*\)|[^\n`;]*)", text):
            module = m.group(1)
            names = [
                n.split(" as ")[0].split("#")[0].strip() for n in m.group(2).strip("()").replace("\n", ",").split(",")
            ]
            private = any(part.startswith("_") for part in module.split("."))
            exported = set(EXPORTED.get(module, ()))
            line = text[: m.start()].count("\n") + 1
            wrong += [f"{path.name}:{line}: {module}.{n}" for n in names if n and (private or n not in exported)]
    assert not wrong
