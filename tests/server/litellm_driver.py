"""Run LiteLLM's embedding and rerank providers against a shortlist service; print one JSON report.

Usage: ``python litellm_driver.py BASE_URL API_KEY MODEL``. LiteLLM runs in this process of its
own (its import sets up module-wide clients and loops a test process should not inherit), behind
:mod:`network_guard`, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it reads its bundled cost map.
Each call's outcome is ``{"ok": true, ...}`` with what the provider parsed, or ``{"ok": false,
"error": ...}``, with ``refused``: every non-loopback connection LiteLLM attempted during it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import network_guard

DOCUMENTS = ["Sunny and warm all week", "Heavy rain expected in Paris tomorrow", "Invoice #42 for ACME corp"]
QUERY = "will it rain in Paris"


def main(url: str, key: str, model: str) -> dict[str, Any]:
    network_guard.install()
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    # A self-hosted model is not in LiteLLM's cost map; to price a huggingface/ embedding or a
    # cohere/ rerank LiteLLM then fetches the model's config from huggingface.co. Per-call prices
    # (LiteLLM's custom pricing, as for any self-hosted model) keep it local.
    free: dict[str, Any] = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}

    texts = ["book a flight to Rome", "weather in Paris"]
    embeddings: dict[str, Callable[[], Any]] = {
        "openai/": lambda: litellm.embedding(model=f"openai/{model}", input=texts, api_base=f"{url}/v1", api_key=key),
        "cohere/": lambda: litellm.embedding(
            model=f"cohere/{model}", input=texts, api_base=f"{url}/v2/embed", api_key=key
        ),
        "jina_ai/": lambda: litellm.embedding(model=f"jina_ai/{model}", input=texts, api_base=f"{url}/v1", api_key=key),
        "voyage/": lambda: litellm.embedding(model=f"voyage/{model}", input=texts, api_base=f"{url}/v1", api_key=key),
        # input_type names the pipeline; without it LiteLLM asks huggingface.co for the model's task
        "huggingface/": lambda: litellm.embedding(
            model=f"huggingface/{model}",
            input=texts,
            api_base=f"{url}/embed",
            api_key=key,
            input_type="feature-extraction",
            **free,
        ),
    }
    reranks: dict[str, str] = {"cohere/": url, "jina_ai/": url, "voyage/": f"{url}/v1", "huggingface/": url}
    report: dict[str, Any] = {"embedding": {}, "rerank": {}}
    for provider, call in embeddings.items():
        before = len(network_guard.ATTEMPTS)
        try:
            response = call()
            vectors = [item["embedding"] for item in response.data]
            outcome: dict[str, Any] = {"ok": True, "vectors": vectors}
        except Exception as exc:  # reported, asserted by the test
            outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        report["embedding"][provider] = {**outcome, "refused": network_guard.ATTEMPTS[before:]}
    for provider, base in reranks.items():
        before = len(network_guard.ATTEMPTS)
        try:
            response = litellm.rerank(
                model=f"{provider}{model}",
                query=QUERY,
                documents=DOCUMENTS,
                top_n=2,
                api_base=base,
                api_key=key,
                **free,
            )
            results = [{"index": r["index"], "relevance_score": r["relevance_score"]} for r in response.results]
            outcome = {"ok": True, "results": results}
        except Exception as exc:
            outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        report["rerank"][provider] = {**outcome, "refused": network_guard.ATTEMPTS[before:]}
    return report


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(*sys.argv[1:4])) + "\n")
