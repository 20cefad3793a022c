"""Read host documents from disk: a JSONL file of documents, or a folder of text/Markdown files."""

from __future__ import annotations

import os
from pathlib import Path

from shortlist._records import records
from shortlist.errors import CatalogError
from shortlist.retrieval._document import Document

__all__ = ["TEXT_SUFFIXES", "load_documents"]

#: File suffixes read from a folder.
TEXT_SUFFIXES = (".txt", ".md", ".markdown")


def _from_jsonl(path: Path) -> list[Document]:
    docs: list[Document] = []
    for number, row in records(path):  # the one JSONL reader: a bad line is a CatalogError naming it
        doc_id, text = row.get("id"), row.get("text")
        if not isinstance(doc_id, str | int) or str(doc_id).strip() == "":
            raise CatalogError(f"{path}:{number}: 'id' is required (a non-empty string)")
        if not isinstance(text, str):
            raise CatalogError(f"{path}:{number}: 'text' is required (a string)")
        title = row.get("title") or ""
        metadata = row.get("metadata") or {}
        if not isinstance(title, str) or not isinstance(metadata, dict):
            raise CatalogError(f"{path}:{number}: 'title' must be a string and 'metadata' an object")
        docs.append(Document(str(doc_id), title, text, metadata))
    return docs


def _title_of(path: Path, text: str) -> str:
    if path.suffix.lower() in (".md", ".markdown"):
        for line in text.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return path.stem


def _from_folder(root: Path) -> list[Document]:
    docs: list[Document] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            file = Path(dirpath) / name
            if name.startswith(".") or file.suffix.lower() not in TEXT_SUFFIXES:
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CatalogError(f"{file}: cannot read: {exc}") from exc
            rel = file.relative_to(root).as_posix()
            docs.append(Document(rel, _title_of(file, text), text, {"path": rel}))
    return docs


def load_documents(path: str | os.PathLike[str]) -> list[Document]:
    """Load documents from a JSONL file (``{"id", "title", "text", "metadata"}`` per line) or a folder.

    In a folder, every ``.txt``/``.md`` file (recursively, hidden ones skipped) is a document
    whose id is its relative path and whose title is its first ``# heading`` or its file name.

    Raises:
        CatalogError: the path is missing, unreadable, malformed, empty, or has duplicate ids.
    """
    p = Path(path)
    if p.is_dir():
        docs = _from_folder(p)
    elif p.is_file():
        docs = _from_jsonl(p)
    else:
        raise CatalogError(f"{p}: no such file or folder")
    if not docs:
        raise CatalogError(f"{p}: no documents found")
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise CatalogError(f"{p}: duplicate document id {doc.id!r}")
        seen.add(doc.id)
    return docs
