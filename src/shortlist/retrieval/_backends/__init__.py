"""Index backends behind one contract: the embedded default and Qdrant (``shortlist[qdrant]``).

``QdrantBackend`` is imported from :mod:`shortlist.retrieval._backends.qdrant` so that the
``qdrant-client`` dependency loads only when it is used.
"""

from shortlist.retrieval._backends.base import Hit, IndexBackend, UpsertReport
from shortlist.retrieval._backends.embedded import EmbeddedBackend

__all__ = ["EmbeddedBackend", "Hit", "IndexBackend", "UpsertReport"]
