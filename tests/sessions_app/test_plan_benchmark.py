"""plan_benchmark reports /v1/plan latency through the service and the REST view (shape only:
timings are for the command's reader, never asserted)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from sessions_app.models import Trace

pytestmark = pytest.mark.django_db


def test_json_output_reports_both_paths_and_the_index():
    out = StringIO()
    call_command(
        "plan_benchmark", "--in-place", "--traces", "30", "--iterations", "3", "--json", stdout=out
    )
    result = json.loads(out.getvalue())
    assert result["traces"] == 30 and result["iterations"] == 3
    assert result["database_mode"] == "in-place"
    for path in ("service_ms", "rest_ms"):
        assert set(result[path]) == {"p50", "p95", "mean", "max"}
        assert 0 < result[path]["p50"] <= result[path]["p95"] <= result[path]["max"]
    assert result["statuses"] == {"injected": 6}
    assert isinstance(result["meets_target"], bool)
    # The traces the plans delivered stay: receipts point to them (evidence is never deleted).
    assert Trace.objects.filter(project__slug="bench-plan").count() == result["n"]


def test_table_output_is_readable():
    out = StringIO()
    call_command("plan_benchmark", "--in-place", "--traces", "10", "--iterations", "2", stdout=out)
    text = out.getvalue()
    assert "p50 ms" in text and "REST (in-process)" in text and "service" in text
