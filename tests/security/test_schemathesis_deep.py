"""A longer schemathesis run than tests/opsconsole/api/test_schemathesis.py's (8 valid and 4 invalid cases per
operation, as an admin): many more generated requests on the action operations — where bodies are parsed,
refused and audited — as an admin (token), as a viewer (token) and as nobody. No answer is a 5xx, every answer
is JSON, an admin's conform to the schema, and every request an action view answered is in the action record
(one row each, with its status).

Default: ACTIONS_EXAMPLES valid and invalid cases per action operation for the admin, a third of that for the
others; an operation that addresses the same view by uid or key gets an eighth of that (schema_sample.py).
The long form runs every operation, reads too, with more cases:
`OPSCONSOLE_SCHEMATHESIS_EXAMPLES=200 .venv/bin/pytest tests/security/test_schemathesis_deep.py -s`
(N valid and N invalid cases per operation and identity)."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
import schemathesis
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
from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.opsconsole.api.schema_sample import Sample
from tests.opsconsole.api.test_schemathesis import wsgi_app  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.long_unit]

ACTIONS_EXAMPLES = 10  # the API has grown to many action operations: 10 each keeps the suite in budget
LONG_EXAMPLES = int(os.environ.get("OPSCONSOLE_SCHEMATHESIS_EXAMPLES", "0"))
CONFORMANCE = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def is_action(operation) -> bool:
    return operation.method.upper() in ("POST", "DELETE")


def run_cases(operation, mode, examples: int, checks: list, headers: dict, answers: list) -> None:
    """Call the operation with generated cases, run the checks on each answer and keep (label, status, body)."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @hsettings(max_examples=examples, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))
    def check(case) -> None:
        response = case.call(headers=headers)
        answers.append((operation.label, response.status_code, response.content[:300]))
        case.validate_response(response, checks=checks, headers=headers)

    check()


def test_generated_requests_as_every_identity_get_no_5xx_and_every_action_is_recorded(kapi, queue, settings,
                                                                                      wsgi_app):  # noqa: F811
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"actions": "100000/min"}}
    admin = f.user("deep-admin", "admin")
    viewer = f.user("deep-viewer", "viewer", ["team-a"])
    identities = {
        "admin": {"Authorization": f"Bearer {token_create(admin, name='deep').secret}"},
        "viewer": {"Authorization": f"Bearer {token_create(viewer, name='deep').secret}"},
        "nobody": {},
    }
    res = f.resource("seeded", labels={"app": "x"})
    f.transition(res, "Pending", run=f.run(res))
    ReconcileRequest.objects.create(resource=res, key=res.key, token="t", actor="user:deep-admin")

    schema = schemathesis.openapi.from_wsgi("/api/v1/schema?format=json", wsgi_app, headers=identities["admin"])
    operations = [result.ok() for result in schema.get_all_operations()]
    chosen = operations if LONG_EXAMPLES else [op for op in operations if is_action(op)]
    assert len([op for op in chosen if is_action(op)]) >= 6
    sample = Sample(operations)  # an operation addressing the same view by uid or key gets fewer cases
    failures: list[str] = []
    answers: list[tuple[str, int, bytes]] = []
    records_before = ActionRecord.objects.count()
    started = time.monotonic()
    for operation in chosen:
        for who, headers in identities.items():
            many = LONG_EXAMPLES or sample.examples(
                operation, ACTIONS_EXAMPLES if who == "admin" else ACTIONS_EXAMPLES // 3)
            runs = [(GenerationMode.NEGATIVE, many, [not_a_server_error, content_type_conformance])]
            if who == "admin":
                runs.append((GenerationMode.POSITIVE, many, CONFORMANCE))
            for mode, examples, checks in runs:
                try:
                    run_cases(operation, mode, examples, checks, headers, answers)
                except Exception as exc:  # collect every operation's failure, then report them together
                    failures.append(f"{operation.label} as {who} ({mode.value}): {str(exc)[:1500]}")
    elapsed = time.monotonic() - started
    assert not failures, "\n\n".join(failures)
    statuses = Counter(status for _, status, _ in answers)
    assert not [s for s in statuses if s >= 500]
    assert statuses[401] > 0 and statuses[403] > 0 and statuses[400] > 0  # refusals and rejections were met

    # every request an action view answered is recorded (a path that matched no route reached no view)
    action_labels = {op.label for op in chosen if is_action(op)}
    answered = [(status, body) for label, status, body in answers
                if label in action_labels and b"No API endpoint at" not in body]
    recorded = ActionRecord.objects.count() - records_before
    assert recorded == len(answered), (recorded, len(answered))
    assert not ActionRecord.objects.filter(status_code__gte=500).exists()
    print(f"\nBAD-INPUT schemathesis: {len(answers)} generated requests on {len(chosen)} operations in {elapsed:.1f} s "
          f"(admin, viewer, nobody); answers {dict(sorted(statuses.items()))}; {recorded} action records")
