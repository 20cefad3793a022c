"""The names of a PostgreSQL corpus index: its URL's parameters, the corpus name, term ids, redacted URLs.

Pure functions (no database, no psycopg), so the other stores that share an index's URL
(``embeddings.postgres``, ``feedback.postgres``) and the CLI can use them; re-exported by
:mod:`shortlist.retrieval._backends.postgres`.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from shortlist.errors import ConfigError

__all__ = [
    "SCHEMA_VERSION",
    "check_corpus_name",
    "redact_url",
    "split_corpus_url",
    "split_index_url",
    "term_id",
]

#: Version of the tables' layout; a corpus written with a newer one is refused (rebuild it). 2: the
#: graph may be split into partial indexes (``hnsw.shards``), which a reader of 1 would not walk. A
#: corpus records the lowest version its layout needs, so one graph stays readable by version 1.
SCHEMA_VERSION = 2
_CORPUS = re.compile(r"[a-z][a-z0-9_]{0,39}")


def term_id(term: str) -> int:
    """A term's id in the postings: its 64-bit BLAKE2b digest as a signed integer (63 bits kept)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little") >> 1


#: The URL parameters that are shortlist's, not libpq's: the corpus, and how queries walk its graph.
_URL_OPTIONS = ("corpus", "ef_search")


def split_index_url(url: str, default: str = "shortlist") -> tuple[str, str, dict[str, str]]:
    """Split ``postgresql://…/db?corpus=NAME&ef_search=N`` into the libpq URL (without shortlist's
    parameters), the corpus name, and the other shortlist parameters given (``ef_search``)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _URL_OPTIONS}
    rest = urlencode([(k, v) for k, v in query if k not in _URL_OPTIONS])
    corpus = ours.pop("corpus", default)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), corpus, ours


def split_corpus_url(url: str, default: str = "shortlist") -> tuple[str, str]:
    """Split ``postgresql://…/db?corpus=NAME`` into the libpq URL (without shortlist's parameters) and the
    corpus name."""
    dsn, corpus, _ = split_index_url(url, default)
    return dsn, corpus


def check_corpus_name(corpus: str) -> str:
    """Return ``corpus`` if it can name a corpus (its tables are named after it).

    Checked before any query that names it: a NUL byte would otherwise reach the server first.

    Raises:
        ConfigError: not 1-40 lowercase letters, digits or ``_``, starting with a letter.
    """
    if not isinstance(corpus, str) or not _CORPUS.fullmatch(corpus):
        raise ConfigError(f"corpus name {corpus!r}: use 1-40 lowercase letters, digits or '_', starting with a letter")
    return corpus


def redact_url(url: str) -> str:
    """``url`` without its password (for messages and reports)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
