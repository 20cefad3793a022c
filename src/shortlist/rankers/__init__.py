"""In-process rankers: BM25, embeddings, hybrid fusion, rerank, LLM judge."""
