"""Logs: JSON lines carry the current trace and span ids; secrets, tokens and Secret data never reach the output."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from opsconsole.logging import REDACTED, JsonFormatter, RedactingFilter, redact_text

TOKEN = "oc_AbCdEf" + "x1Y2z3" * 6


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing JSON through the redacting filter into a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.logging.capture")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    yield logger, stream
    logger.removeHandler(handler)


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_json_line_carries_the_current_span_trace_and_span_ids(capture) -> None:
    logger, stream = capture
    tracer = TracerProvider().get_tracer("tests")
    with tracer.start_as_current_span("reconcile Memcached") as span:
        logger.info("reconciled %s", "default/m1", extra={"key": "cache.example.com/v1alpha1/memcacheds/default/m1"})
    logger.info("outside")
    inside, outside = _lines(stream)
    ctx = span.get_span_context()
    assert inside["trace_id"] == format(ctx.trace_id, "032x") and len(inside["trace_id"]) == 32
    assert inside["span_id"] == format(ctx.span_id, "016x")
    assert inside["message"] == "reconciled default/m1" and inside["level"] == "INFO"
    assert inside["key"].endswith("/default/m1") and inside["time"].endswith("Z")
    assert outside["trace_id"] == "" and outside["span_id"] == ""


def test_authorization_headers_and_api_tokens_are_redacted(capture) -> None:
    logger, stream = capture
    logger.warning("request headers %s", {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"})
    logger.warning("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig' https://k8s")
    logger.warning("token %s refused", TOKEN)
    text = stream.getvalue()
    assert TOKEN not in text and "eyJhbGciOiJIUzI1NiJ9" not in text and "x1Y2z3" not in text
    first, second, third = _lines(stream)
    assert "application/json" in first["message"] and REDACTED in first["message"]
    assert "Bearer [REDACTED]" in second["message"]
    assert third["message"] == f"token oc_AbCdEf{REDACTED} refused"


def test_kubernetes_secret_data_is_redacted_in_dicts_and_client_objects(capture) -> None:
    from kubernetes.client import V1ObjectMeta, V1Secret

    logger, stream = capture
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "prod"},
              "data": {"password": "aHVudGVyMg=="}, "stringData": {"url": "postgres://u:hunter2@db/x"}}
    logger.info("applied %s", secret)
    logger.info("read %s", V1Secret(metadata=V1ObjectMeta(name="db", namespace="prod"), data={"k": "c2VjcmV0"}))
    logger.info("object", extra={"obj": secret})
    text = stream.getvalue()
    for leaked in ("aHVudGVyMg==", "hunter2", "c2VjcmV0"):
        assert leaked not in text
    first, second, third = _lines(stream)
    assert "'name': 'db'" in first["message"]
    assert second["message"] == f"read <Secret prod/db data {REDACTED}>"
    assert third["obj"]["data"] == {"password": REDACTED} and third["obj"]["metadata"]["name"] == "db"


def test_exception_text_is_redacted_too(capture) -> None:
    logger, stream = capture
    try:
        raise RuntimeError(f"could not connect to postgres://opsconsole:s3cr3tpw@db:5432/opsconsole with {TOKEN}")
    except RuntimeError:
        logger.exception("database down")
    (line,) = _lines(stream)
    assert "s3cr3tpw" not in line["exception"] and TOKEN not in line["exception"]
    assert "postgres://opsconsole:[REDACTED]@db:5432" in line["exception"]


@pytest.mark.parametrize(("text", "expected"), [
    ("password=hunter2&user=a", f"password={REDACTED}&user=a"),
    ('{"secret_key": "abc123"}', f'{{"secret_key": "{REDACTED}"}}'),
    ("Basic dXNlcjpwYXNz", f"Basic {REDACTED}"),
    ("reconciled default/m1 in 0.2 s", "reconciled default/m1 in 0.2 s"),
])
def test_redact_text_replaces_secret_values_and_leaves_ordinary_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_the_project_logging_config_filters_every_record_on_the_console_handler() -> None:
    from django.conf import settings

    handler = settings.LOGGING["handlers"]["console"]
    assert handler["filters"] == ["redact"]
    assert settings.LOGGING["filters"]["redact"]["()"] == "opsconsole.logging.RedactingFilter"
    assert handler["formatter"] in settings.LOGGING["formatters"]


def test_celery_workers_keep_the_project_logging_instead_of_their_own_root_handler() -> None:
    from opsconsole.celery import app

    assert app.conf.worker_hijack_root_logger is False
