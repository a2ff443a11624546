"""The recorder's duplicate check (is this review's uid on record already?) is an index probe, not a scan of every
action record's JSON: the query the recorder runs uses migration 0006's index on PostgreSQL. (The scale itself,
1,000,000 records, is measured by bench/admission/recorder_scale.py, never by the suite.)"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from reconcilers.models import ActionRecord

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the plan is PostgreSQL's")
def test_the_duplicate_check_by_uid_uses_the_index():
    query = ActionRecord.objects.filter(action="admission.validate", detail__uid="0b6c8f6e-uid")
    sql, params = query.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a test table is tiny: ask whether the index can serve
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "actionrecord_detail_uid" in plan, plan
