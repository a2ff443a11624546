"""Property-based run of the served OpenAPI schema (schemathesis, in process against the WSGI app, bounded
examples per operation, fewer for an operation that addresses the same view by another key, see
schema_sample.py): no 5xx, and every answer conforms to the schema (status, content type, body);
then bad input generated from the schema (negative mode): never a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from opsconsole.accounts.tokens import token_create
from reconcilers.models import ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.opsconsole.api.schema_sample import Sample

pytestmark = [pytest.mark.django_db, pytest.mark.long_unit]


@pytest.fixture
def wsgi_app():
    """The project's WSGI app, without closing the test's database connection at each request's end (as
    Django's test client does)."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
EXAMPLES = 8
NEGATIVE_EXAMPLES = 4  # bad input: only "never a 5xx" applies
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def property_test(operation, mode, examples: int, checks: list, headers: dict):
    """A Hypothesis test calling the operation with generated cases and running the checks on each answer."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @hsettings(max_examples=examples, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))
    def check(case) -> None:
        case.call_and_validate(headers=headers, checks=checks)

    return check


def test_the_served_schema_holds_for_generated_requests(kapi, queue, settings, wsgi_app):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"actions": "100000/min"}}
    admin = f.user("schema-admin", "admin")
    headers = {"Authorization": f"Bearer {token_create(admin, name='schemathesis').secret}"}
    res = f.resource("seeded", labels={"app": "x"})
    f.transition(res, "Pending", run=f.run(res))
    ReconcileRequest.objects.create(resource=res, key=res.key, token="t", actor="user:schema-admin")

    schema = schemathesis.openapi.from_wsgi("/api/v1/schema?format=json", wsgi_app, headers=headers)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    sample = Sample(operations)
    assert sum(sample.is_alias(op) for op in operations) >= 40  # the id, uid and key addresses of one view
    failures: list[str] = []
    runs = [
        (GenerationMode.POSITIVE, EXAMPLES, CHECKS),
        (GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES, [not_a_server_error]),
    ]
    for operation in operations:
        for mode, examples, checks in runs:
            try:
                property_test(operation, mode, sample.examples(operation, examples), checks, headers)()
            except Exception as exc:  # collect every operation's failure, then report them together
                failures.append(f"{operation.label} ({mode.value}): {str(exc)[:1500]}")
    assert not failures, "\n\n".join(failures)
