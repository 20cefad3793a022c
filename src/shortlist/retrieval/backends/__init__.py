"""Index backends behind one contract: the embedded default and Qdrant (``shortlist[qdrant]``).

``QdrantBackend`` is imported from :mod:`shortlist.retrieval.backends.qdrant` so that the
``qdrant-client`` dependency loads only when it is used.
"""

from shortlist.retrieval.backends.base import Hit, IndexBackend, UpsertReport
from shortlist.retrieval.backends.embedded import EmbeddedBackend

__all__ = ["EmbeddedBackend", "Hit", "IndexBackend", "UpsertReport"]
