"""The Spec panel shows a spec as its author wrote it (issue 43): a multi-line string is a literal block (`|`),
not a single-quoted scalar with doubled blank lines, and what is shown reads back as the same document (the
what-if form starts from it)."""

from __future__ import annotations

import html

import pytest
import yaml

from opsconsole.console.templatetags.console import as_yaml
from tests.opsconsole.api import factories as f

PAGE = "<h1>Welcome</h1>\n\n<p>Served by a StaticSite.</p>\n"


@pytest.mark.parametrize("spec", [
    {"content": PAGE, "replicas": 2},
    {"z": {"lines": ["a\nb", "c"]}, "last": "ends\n\n"},  # a block last, keeping its blank line
    {"last": "no final break\nsecond"},
    {"trailing": "spaces  \nhere"},  # a block cannot hold these: quoted, still exact
])
def test_multi_line_strings_are_literal_blocks_that_read_back_the_same(spec):
    text = as_yaml(spec)
    assert yaml.safe_load(text) == spec
    assert "''" not in text and "'" not in text.split(":")[1]  # never the single-quoted form


def test_a_page_of_html_is_shown_line_for_line():
    text = as_yaml({"content": PAGE})
    assert text.splitlines() == ["content: |", "  <h1>Welcome</h1>", "", "  <p>Served by a StaticSite.</p>"]
    assert as_yaml({"one": "line"}) == "one: line" and as_yaml({}) == "{}"


@pytest.mark.django_db
def test_the_spec_panel_shows_the_block(as_role):
    res = f.resource("site", "web", spec={"content": PAGE, "replicas": 1})
    page = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    panel = html.unescape(page.split('id="spec-h"')[1].split("</pre>")[0])
    assert "content: |\n  <h1>Welcome</h1>\n\n  <p>Served by a StaticSite.</p>\nreplicas: 1" in panel
