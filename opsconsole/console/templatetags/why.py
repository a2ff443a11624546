"""`{% why_of r as why %}`: the detail page's "Why" panel's answer (`reconcilers.services.explain`), computed where
the panel is included, so the page's view needs no part of it; `{% established_text why.transition %}`-style
words come with the answer itself."""

from __future__ import annotations

from typing import Any

from django import template

from reconcilers.models import Resource
from reconcilers.services import explain

register = template.Library()


@register.simple_tag
def why_of(resource: Resource) -> dict[str, Any]:
    """Why `resource` is in its phase, from the record."""
    return explain.explain(resource)
