"""Issue 41: one webhook server per cluster (`runwebhooks --cluster NAME`). A write admitted by cluster b's server
is noted on b's lists only (the default cluster's engine never credits it to its same-named object) and its
decision goes on record under b, its target b's key; a bad --cluster is refused before anything starts."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis as redis_lib
from django.conf import settings
from django.core.management import CommandError, call_command

from kubesim.testing import wait_for
from reconcilers.engine.admitted import admitted_find, signing_key
from reconcilers.models import ActionRecord
from tests.opsconsole.test_webhook_mtls import PATH, forged_review, post
from tests.support.webhooks_mtls import mtls_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def served_b(tmp_path_factory) -> Any:
    server, files = mtls_server(tmp_path_factory.mktemp("mtls-b"), cluster="b")
    yield server, files
    server.stop()


def test_cluster_bs_server_notes_on_bs_lists_and_files_its_decision_under_b(served_b):
    server, files = served_b
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    key = signing_key(settings.SECRET_KEY)
    name = f"noted-{uuid.uuid4().hex[:6]}"
    obj = {"metadata": {"name": name, "namespace": "team-b", "uid": "obj-b"}, "spec": {"size": 2}}
    review = forged_review(name=name, operation="UPDATE", object=obj)
    status, answer = post(server.url() + PATH, review, files.client_context())
    assert status == 200 and answer["response"]["allowed"] is True

    def found(cluster: str) -> dict[str, Any] | None:
        return admitted_find(client, key, "cache.example.com", "Memcached", "team-b", name,
                             match=lambda e: True, cluster=cluster)

    assert found("b") is not None and found("b")["user"]["username"] == "mallory"
    assert found("default") is None  # the default cluster's team-b/<name> was not written by mallory
    (record,) = wait_for(lambda: list(ActionRecord.objects.filter(action="admission.validate",
                                                                  detail__uid=review["request"]["uid"])),
                         timeout=15)
    assert record.cluster == "b"
    assert record.target == f"b/cache.example.com/v1alpha1/memcacheds/team-b/{name}"


def test_runwebhooks_refuses_a_cluster_name_that_is_not_a_dns_label():
    with pytest.raises(CommandError, match="--cluster"):
        call_command("runwebhooks", "--cluster", "Not_A_Label", "--port", "0", "--metrics-port", "-1")
