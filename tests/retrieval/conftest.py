"""Shared fixtures for grounding tests: the real offline embedder (loaded once) and a small corpus."""

from __future__ import annotations

import pytest

from shortlist.embeddings._base import Embedder
from shortlist.retrieval import Document

HELP_CENTER = [
    Document(
        "pw-reset",
        "Reset your password",
        "To reset your password, open Settings, choose Security and click 'Reset password'. "
        "We email you a link that stays valid for one hour.",
        {"section": "account"},
    ),
    Document(
        "two-factor",
        "Two-factor authentication",
        "Turn on two-factor authentication under Settings > Security. You can use an authenticator app "
        "or SMS codes to confirm each sign-in.",
        {"section": "account"},
    ),
    Document(
        "shipping",
        "Shipping and delivery times",
        "Orders ship within two business days. Delivery takes three to five business days in Europe "
        "and up to ten days elsewhere. You get a tracking number by email.",
        {"section": "orders"},
    ),
    Document(
        "refunds",
        "Refund policy",
        "You can return any unused item within 30 days of delivery for a full refund to the original "
        "payment method. Refunds take five days to appear on your statement.",
        {"section": "orders"},
    ),
    Document(
        "invoices",
        "Download invoices",
        "Invoices for every order are available as PDF files under Orders > Invoices in your account.",
        {"section": "billing"},
    ),
    Document(
        "api-keys",
        "API keys",
        "Create an API key under Developer settings. Keep it secret: anyone with the key can call the API "
        "on your behalf. Rotate keys every 90 days.",
        {"section": "developers"},
    ),
]


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    """The offline default embedder (all-MiniLM-L6-v2, int8 ONNX)."""
    from shortlist.embeddings._default import default_embedder

    return default_embedder()


@pytest.fixture(scope="session")
def help_center() -> list[Document]:
    return list(HELP_CENTER)
