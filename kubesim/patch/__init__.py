"""Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch, apply."""

from kubesim.patch.jsonpatch import apply_json_patch, merge_patch
from kubesim.patch.strategic import strategic_merge

__all__ = ["apply_json_patch", "merge_patch", "strategic_merge"]
