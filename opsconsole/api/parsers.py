"""The API's JSON parser: DRF's, except that a body nested past Python's recursion limit is a 400 parse error
like any other malformed JSON (DRF's lets the RecursionError through, which would be a 500). The body size limit
is Django's DATA_UPLOAD_MAX_MEMORY_SIZE (DRF reads JSON through `request.body`, which enforces it); the error
handler turns it into a 413."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """application/json, with deep nesting refused as a parse error."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
