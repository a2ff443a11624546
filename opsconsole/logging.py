"""Log records as one JSON object per line with the current trace, and a filter that keeps secrets out of logs.

`JsonFormatter` writes time, level, logger, message, process and the `trace_id`/`span_id` of the OpenTelemetry
span current when the record was made (so a log line leads to its trace in the console); extra fields given
with `extra=` are kept. `RedactingFilter` runs before any formatter on the handler: it renders the message,
replaces Authorization credentials (`Bearer …`, `Basic …`), opsconsole API tokens (`oc_…`, keeping the
6-character prefix the token list shows), `password=`/`secret=`/`token=`-style values, passwords in URLs and
the data of Kubernetes Secrets (dicts or client objects passed as arguments or extras) with `[REDACTED]`.
Settings: `LOG_FORMAT=json` (the production default) or `plain`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

REDACTED = "[REDACTED]"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Authorization: Bearer <token> / Basic <credentials>
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{4,}"), rf"\1\2{REDACTED}"),
    # opsconsole API tokens: keep the prefix shown in the token list, drop the rest
    (re.compile(r"\b(oc_[A-Za-z0-9_-]{6})[A-Za-z0-9_-]{4,}"), rf"\1{REDACTED}"),
    # key=value / "key": "value" for secret-looking keys
    (re.compile(r"(?i)((?:password|passwd|secret(?:_key)?|api[_-]?key|access[_-]?token|refresh[_-]?token|token|"
                r"authorization|cookie|sessionid|csrftoken)[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED\]|(?:bearer|basic)\s)([^\s\"',;&}]+)"),
     rf"\1{REDACTED}"),
    # scheme://user:password@host
    (re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/\s@]+:)([^@\s/]+)(@)"), rf"\1{REDACTED}\3"),
]
_SECRET_KEYS = re.compile(r"(?i)^(password|passwd|secret|secret_key|api[_-]?key|token|access_token|refresh_token|"
                          r"authorization|cookie|set-cookie|x-api-key|bearer)$")
_STANDARD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def redact_text(text: str) -> str:
    """The text with credentials, tokens and secret values replaced by [REDACTED]."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_value(value: Any, _depth: int = 0) -> Any:
    """A copy of a log argument with secrets removed: Secret data, secret-named keys, tokens in strings."""
    if _depth > 8:
        return value
    if isinstance(value, str):
        return redact_text(value)
    if type(value).__name__ == "V1Secret":  # the kubernetes client's Secret object
        meta = getattr(value, "metadata", None)
        where = f"{getattr(meta, 'namespace', '')}/{getattr(meta, 'name', '')}"
        return f"<Secret {where} data {REDACTED}>"
    if isinstance(value, Mapping):
        is_secret = value.get("kind") == "Secret"
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if (is_secret and key in ("data", "stringData")) or (isinstance(key, str) and _SECRET_KEYS.match(key)):
                out[key] = REDACTED if not isinstance(item, Mapping) else {k: REDACTED for k in item}
            else:
                out[key] = redact_value(item, _depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items = [redact_value(v, _depth + 1) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    return value


class RedactingFilter(logging.Filter):
    """Render each record's message with redacted arguments, redact the result and any exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place (never drops it)."""
        try:
            if record.args:
                args = record.args
                record.args = (redact_value(dict(args)) if isinstance(args, Mapping)  # type: ignore[assignment]
                               else tuple(redact_value(a) for a in args))
            message = record.getMessage()
        except Exception:  # a broken format string: log what we have rather than nothing
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = redact_text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        for key in set(vars(record)) - _STANDARD_ATTRS:
            setattr(record, key, redact_value(getattr(record, key)))
        return True


def current_trace_ids() -> tuple[str, str]:
    """(trace_id, span_id) of the current OpenTelemetry span as hex, or ('', '') outside any span or in one that
    is not sampled (its trace is not stored: a log line must not point at it)."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid or not ctx.trace_flags.sampled:
        return "", ""
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, trace_id, span_id, process, extras."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a single JSON line."""
        trace_id, span_id = current_trace_ids()
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": trace_id or str(getattr(record, "trace_id", "") or ""),
            "span_id": span_id or str(getattr(record, "span_id", "") or ""),
            "process": record.process,
            "thread": record.threadName,
        }
        for key in sorted(set(vars(record)) - _STANDARD_ATTRS - set(out)):
            out[key] = getattr(record, key)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, default=str, ensure_ascii=False)
