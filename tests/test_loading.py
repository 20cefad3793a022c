"""``module:attribute`` names: one parser and importer for models in configuration and the built-ins."""

from __future__ import annotations

import os.path

import pytest

from shortlist._loading import import_attribute, load_attribute
from shortlist.errors import ConfigError


def test_a_dotted_attribute_is_followed() -> None:
    assert load_attribute("os:path.join", what="x") is os.path.join
    assert import_attribute("os", "path.join") is os.path.join


@pytest.mark.parametrize("spec", ["no_colon", ":join", "os:", ""])
def test_a_name_that_is_not_module_attribute_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="the judge model must be given as 'module:attribute'"):
        load_attribute(spec, what="the judge model")


@pytest.mark.parametrize("spec", ["no_such_module_xyz:f", "os:no_such_attribute"])
def test_what_cannot_be_loaded_is_a_config_error_naming_it(spec: str) -> None:
    with pytest.raises(ConfigError, match=f"cannot load the judge model '{spec}'"):
        load_attribute(spec, what="the judge model")
    with pytest.raises((ImportError, AttributeError)):  # the importer itself raises what Python raises
        import_attribute(*spec.split(":"))
