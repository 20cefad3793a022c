"""A built-in selector's ``options:`` are checked when runtime.yaml loads, not at first use (issue 12).

Before, a typo'd option loaded, the service reported ready and every selection failed.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from shortlist._config import load_runtime_config, parse_runtime_config, runtime_config_schema
from shortlist.errors import ConfigError

README = Path(__file__).resolve().parents[2] / "README.md"


def write(tmp_path: Path, spec: dict[str, Any]) -> Path:
    p = tmp_path / "runtime.yaml"
    p.write_text(yaml.safe_dump({"spec": spec}))
    return p


def load_error(tmp_path: Path, type_name: str, options: dict[str, Any]) -> tuple[Path, str]:
    p = write(tmp_path, {"selectors": {"fast": {"type": type_name, "options": options}}, "tool_selector": "fast"})
    with pytest.raises(ConfigError) as exc:
        load_runtime_config(p)
    return p, str(exc.value)


@pytest.mark.parametrize(
    ("type_name", "options", "key", "hint"),
    [
        ("hybrid", {"top_kk": 8}, "top_kk", "did you mean 'top_k'?"),
        ("bm25", {"min_scor": 1.0}, "min_scor", "did you mean 'min_score'?"),
        ("embedding", {"example_wieght": 0.5}, "example_wieght", "did you mean 'example_weight'?"),
        ("rerank", {"candidate_n": 20}, "candidate_n", "did you mean 'candidates_n'?"),
        ("llm", {"shortlist": 10}, "shortlist", "did you mean 'shortlist_n'?"),
        ("overlap", {"k": 3}, "k", "known options: top_k"),
        ("bm25", {"name": "other"}, "name", "known options:"),  # set by the registry, not an option
    ],
)
def test_typo_in_an_option_key_fails_at_load(
    tmp_path: Path, type_name: str, options: dict[str, Any], key: str, hint: str
) -> None:
    p, msg = load_error(tmp_path, type_name, options)
    assert msg.startswith(f"{p}: spec.selectors.fast.options.{key}: unknown option {key!r}"), msg
    assert hint in msg, msg


@pytest.mark.parametrize(
    ("type_name", "options", "key", "words"),
    [
        ("hybrid", {"top_k": "8"}, "top_k", "valid integer"),
        ("bm25", {"stem": 1}, "stem", "valid boolean"),
        ("bm25", {"k1": "high"}, "k1", "valid number"),
        ("hybrid", {"bm25": [1.2, 0.75]}, "bm25", "HybridBm25Options"),
        ("embedding", {"vector_cache": 3}, "vector_cache", "valid string"),
        ("hybrid", {"fusion": "rff"}, "fusion", "'score' or 'rrf'"),
        ("bm25", {"stopwords": "english"}, "stopwords", "'en', 'en_plus' or 'none'"),
        ("rerank", {"protocol": "openai"}, "protocol", "'default', 'cohere', 'voyage' or 'tei'"),
        ("llm", {"model": "no_colon"}, "model", "'module:attribute'"),
    ],
)
def test_wrong_type_of_an_option_fails_at_load(
    tmp_path: Path, type_name: str, options: dict[str, Any], key: str, words: str
) -> None:
    p, msg = load_error(tmp_path, type_name, options)
    assert msg.startswith(f"{p}: spec.selectors.fast.options.{key}: "), msg
    assert words in msg, msg


@pytest.mark.parametrize(
    ("type_name", "options", "key", "words"),
    [
        ("hybrid", {"top_k": 0}, "top_k", "greater than 0"),
        ("lexical", {"top_k": -1}, "top_k", "greater than 0"),
        ("bm25", {"b": 1.5}, "b", "less than or equal to 1"),
        ("bm25", {"k1": -0.1}, "k1", "greater than or equal to 0"),
        ("bm25", {"cache_size": 0}, "cache_size", "greater than or equal to 1"),
        ("embedding", {"example_weight": 2}, "example_weight", "less than or equal to 1"),
        ("embedding", {"adaptive_k": 1.0}, "adaptive_k", "less than 1"),
        ("hybrid", {"rrf_k": 0}, "rrf_k", "greater than 0"),
        ("rerank", {"timeout_s": 0}, "timeout_s", "greater than 0"),
        ("llm", {"description_chars": 5}, "description_chars", "greater than or equal to 10"),
    ],
)
def test_out_of_range_option_fails_at_load(
    tmp_path: Path, type_name: str, options: dict[str, Any], key: str, words: str
) -> None:
    p, msg = load_error(tmp_path, type_name, options)
    assert msg.startswith(f"{p}: spec.selectors.fast.options.{key}: "), msg
    assert words in msg and "(got " in msg, msg


def test_nested_typo_in_hybrid_bm25_and_embedding_fails_at_load(tmp_path: Path) -> None:
    p, msg = load_error(tmp_path, "hybrid", {"top_k": 8, "bm25": {"k_1": 1.2, "b": 0.75}})
    assert msg.startswith(f"{p}: spec.selectors.fast.options.bm25.k_1: unknown option 'k_1' in 'bm25'"), msg
    assert "did you mean 'k1'?" in msg, msg
    # top_k of the inner rankers is the hybrid's own: not an inner option
    _, msg = load_error(tmp_path, "hybrid", {"embedding": {"top_k": 3}})
    assert "spec.selectors.fast.options.embedding.top_k: unknown option 'top_k' in 'embedding'" in msg, msg
    _, msg = load_error(tmp_path, "hybrid", {"embedding": {"abstention": {"min_scor": 0.5}}})
    assert "options.embedding.abstention.min_scor" in msg and "did you mean 'min_score'?" in msg, msg
    _, msg = load_error(tmp_path, "hybrid", {"bm25": {"b": 2}})
    assert "spec.selectors.fast.options.bm25.b: " in msg and "less than or equal to 1" in msg, msg


def test_unknown_selector_type_fails_at_load(tmp_path: Path) -> None:
    p = write(tmp_path, {"selectors": {"fast": {"type": "bm52"}}})
    with pytest.raises(ConfigError) as exc:
        load_runtime_config(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: spec.selectors.fast.type: unknown selector type 'bm52'"), msg
    assert "did you mean 'bm25'?" in msg, msg


def readme_config() -> str:
    section = README.read_text().split("## Configuration (`runtime.yaml`)", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_readme_example_loads_and_its_options_build_the_ranker(tmp_path: Path) -> None:
    from shortlist.rankers._registry import create_builtin_selector

    p = tmp_path / "runtime.yaml"
    p.write_text(readme_config())
    cfg = load_runtime_config(p)
    fast = cfg.spec.active_selectors["fast"]
    assert fast.options["bm25"] == {"k1": 1.2, "b": 0.75}  # kept as written
    selector = create_builtin_selector(fast.type, name="fast", **fast.options)
    assert selector.name == "fast"


def test_valid_options_of_every_type_load() -> None:
    valid: dict[str, dict[str, Any]] = {
        "overlap": {"top_k": 3},
        "lexical": {"top_k": 3},
        "bm25": {"top_k": 5, "k1": 1, "b": 0, "stopwords": "none", "stem": False, "examples_mode": "merge",
                 "min_score": 0.1, "adaptive_k": 0.5, "normalize": True, "cache_size": 1},
        "embedding": {"abstention": {"min_score": 0.5, "min_margin": 0.01}, "example_weight": 1,
                      "example_top": 1, "use_examples": False, "vector_cache": "/tmp/v.sqlite"},
        "hybrid": {"fusion": "rrf", "bm25_weight": 1, "rrf_k": 10, "confidence_bm25_weight": 0,
                   "bm25": {"normalize": False, "examples_weight": 0}, "embedding": {"min_score": 0.3}},
        "rerank": {"url": "http://localhost:9/rerank", "protocol": "tei", "first_stage": "bm25",
                   "candidates_n": 10, "timeout_s": 0.5, "api_key_env": "MY_KEY"},
        "llm": {"model": "shortlist.testing:ScriptedModel", "first_stage": "bm25", "shortlist_n": 5,
                "allow_model_requests": True, "abstention": {"min_score": 0.2}},
    }  # fmt: skip
    spec = {"selectors": {t: {"type": t, "options": o} for t, o in valid.items()}}
    cfg = parse_runtime_config({"spec": spec})
    assert {n: s.options for n, s in cfg.spec.active_selectors.items()} == valid


def test_exec_selector_config_is_unaffected(tmp_path: Path) -> None:
    spec = {
        "selectors": {
            "rerank": {"command": "python", "args": ["/s/r.py"], "timeout_ms": 3000, "worker": True},
            # an exec selector's options are its own business: not checked against any ranker
            "custom": {"type": "exec", "command": "ranker", "options": {"anything": [1, 2], "top_kk": 1}},
            "inline": {"type": "exec:python r.py", "options": {"timeout_ms": 500}},
        },
        "tool_selector": "rerank",
    }
    cfg = load_runtime_config(write(tmp_path, spec))
    sels = cfg.spec.active_selectors
    assert sels["rerank"].command == "python" and sels["rerank"].worker
    assert sels["custom"].options == {"anything": [1, 2], "top_kk": 1}
    assert sels["inline"].type == "exec:python r.py"


def test_every_problem_is_counted(tmp_path: Path) -> None:
    _, msg = load_error(tmp_path, "bm25", {"k2": 1, "b": 3})
    assert "(and 1 more problem(s))" in msg, msg


# -- the models cannot drift from the constructors -------------------------------------------


def _keywords(factory: Any) -> dict[str, inspect.Parameter]:
    params = inspect.signature(factory).parameters.values()
    return {p.name: p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def test_one_table_holds_each_builtin_type_with_its_options_model() -> None:
    from pydantic import BaseModel

    from shortlist import _builtins as builtins
    from shortlist.rankers import _registry as registry

    assert registry.BUILTIN_SELECTORS is builtins.BUILTIN_SELECTORS  # one table, not a mirror
    for entry in builtins.BUILTIN_SELECTORS.values():
        assert ":" in entry.factory and issubclass(entry.options, BaseModel)


def _literal_choices(hint: Any) -> set[Any] | None:
    for arg in (hint, *typing.get_args(hint)):
        if typing.get_origin(arg) is typing.Literal:
            return set(typing.get_args(arg))
    return None


def _check_model(model: Any, factory: Any, *, excluded: set[str], defaults: dict[str, Any] | None = None) -> None:
    """``model`` mirrors ``factory``'s keywords; ``defaults``: the values a wrapping ranker passes instead."""
    from shortlist._builtins import NOT_OPTIONS

    keywords = _keywords(factory)
    hints = typing.get_type_hints(factory.__init__)
    fields = model.model_fields
    assert set(fields) <= set(keywords) - excluded, f"{model.__name__}: not constructor keywords"
    assert set(keywords) - set(fields) <= NOT_OPTIONS | excluded, f"{model.__name__}: keywords without a field"
    for name, field in fields.items():
        want = (defaults or {}).get(name, keywords[name].default)
        assert field.default == want, f"{model.__name__}.{name}: default differs"
        choices = _literal_choices(hints.get(name))
        if choices is not None:
            assert _literal_choices(field.annotation) == choices, f"{model.__name__}.{name}: choices differ"


def test_every_option_is_a_constructor_keyword_with_its_default() -> None:
    from shortlist._builtins import BUILTIN_SELECTORS
    from shortlist.rankers._registry import _load_factory

    for type_name, entry in BUILTIN_SELECTORS.items():
        _check_model(entry.options, _load_factory(type_name), excluded=set())


def test_nested_models_match_the_inner_rankers() -> None:
    from shortlist._builtins import AbstentionOptions, HybridBm25Options, HybridEmbeddingOptions
    from shortlist.rankers._base import Abstention
    from shortlist.rankers._bm25 import FUSED_EXAMPLES_WEIGHT, Bm25Ranker
    from shortlist.rankers._embedding import EmbeddingRanker
    from shortlist.rankers._hybrid import HybridRanker
    from shortlist.rankers._text import STOPWORD_SETS

    # the hybrid passes name= and top_k= itself, and normalize / examples_weight unless bm25: says otherwise
    inner = HybridRanker().bm25
    passed = {"normalize": inner.normalize, "examples_weight": inner.examples_weight}
    assert passed == {"normalize": True, "examples_weight": FUSED_EXAMPLES_WEIGHT}
    _check_model(HybridBm25Options, Bm25Ranker, excluded={"top_k"}, defaults=passed)
    _check_model(HybridEmbeddingOptions, EmbeddingRanker, excluded={"top_k"})
    assert set(AbstentionOptions.model_fields) == {f.name for f in dataclasses.fields(Abstention)}
    assert _literal_choices(HybridBm25Options.model_fields["stopwords"].annotation) == set(STOPWORD_SETS)


def test_every_model_builds_its_ranker_with_every_field_given() -> None:
    from shortlist._builtins import BUILTIN_SELECTORS
    from shortlist.rankers._registry import create_builtin_selector

    for type_name, entry in BUILTIN_SELECTORS.items():
        options = entry.options().model_dump()  # every field, at its default
        assert create_builtin_selector(type_name, name=type_name, **options).name == type_name


def test_schema_describes_the_options_of_each_type() -> None:
    import jsonschema

    schema = runtime_config_schema()
    assert "HybridOptions" in schema["$defs"] and "HybridBm25Options" in schema["$defs"]
    validator = jsonschema.Draft202012Validator(schema)
    good = {"spec": {"selectors": {"f": {"type": "hybrid", "options": {"bm25": {"k1": 1.2}}}, "x": {"command": "r"}}}}
    assert not list(validator.iter_errors(good))
    bad = {"spec": {"selectors": {"f": {"type": "hybrid", "options": {"bm25": {"k_1": 1.2}}}}}}
    assert list(validator.iter_errors(bad))


@pytest.mark.slow  # a real `shortlist serve` process: were it to start, the timeout ends it
def test_serve_refuses_to_start_with_a_typo_in_options(tmp_path: Path) -> None:
    p = write(tmp_path, {"selectors": {"fast": {"type": "hybrid", "options": {"top_kk": 8}}}, "tool_selector": "fast"})
    out = subprocess.run(
        [sys.executable, "-m", "shortlist.cli", "serve", "--config", str(p), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,  # before the fix, the service started and served
    )
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "spec.selectors.fast.options.top_kk: unknown option 'top_kk'" in out.stderr, out.stderr
    assert "did you mean 'top_k'?" in out.stderr, out.stderr
