"""kubesim's YAML bodies (apply patches, application/yaml): JSON read as JSON, YAML as YAML, the same result."""

from __future__ import annotations

import pytest
import yaml

from kubesim.meta import load_yaml


def test_a_json_body_and_its_yaml_form_decode_to_the_same_object():
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "on": "yes"}}
    assert load_yaml('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, '
                     '"data": {"a": "1", "on": "yes"}}') == obj
    assert load_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: '1'\n  'on': 'yes'\n") == obj


def test_flow_style_yaml_that_is_not_json_still_decodes():
    assert load_yaml("{a: 1, b: [x, y]}") == {"a": 1, "b": ["x", "y"]}


def test_a_broken_body_raises_a_yaml_error():
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: [1, 2")
