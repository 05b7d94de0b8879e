"""A ``?format=`` no renderer serves is a 400 naming the parameter, in the error shape, on
every operation; Django's own 404 and 403 raised in a view get the same shape."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework.test import APIClient

from memoryproject.drf import exception_handler
from tests.security.test_inputs import _url, broke_the_rule, operations

pytestmark = pytest.mark.django_db


def test_an_unknown_format_is_a_400_naming_format_on_every_get(admin_api, schema, ids):
    gets = [template for method, template, _ in operations(schema) if method == "GET"]
    assert len(gets) >= 10
    failures = []
    for template in gets:
        extra = "as_of=2026-01-01T00:00:00Z&" if "time-travel" in template else ""
        response = admin_api.get(f"{_url(template, ids)}?{extra}format=%C2%9A%C3%8A")
        problem = broke_the_rule(response, "format")
        if problem is not None:
            failures.append(f"{template}: {problem}")
    assert not failures, "\n".join(failures)
    body = admin_api.get("/v1/traces?format=xml").json()
    assert body["message"] == "format: must be one of json"


def test_the_schema_is_still_served_in_the_format_asked_for(admin_api):
    assert admin_api.get("/v1/schema/", {"format": "json"})["Content-Type"].startswith(
        "application/vnd.oai.openapi+json"
    )
    # A format it does not publish: a 400 in the error shape (the schema view renders errors in
    # its own formats; the error middleware answers the JSON one).
    assert broke_the_rule(admin_api.get("/v1/schema/", {"format": "xml"})) is None


@pytest.mark.parametrize(
    ("raised", "status", "code"),
    [(Http404(), 404, "not_found"), (PermissionDenied(), 403, "permission_denied")],
)
def test_djangos_own_errors_get_the_error_shape(raised, status, code):
    response = exception_handler(raised, {"request": None, "view": None})
    assert response is not None and response.status_code == status
    assert response.data["code"] == code and response.data["message"]


def test_without_a_key_an_unknown_format_is_refused_the_same_way():
    # The format is read before the key (DRF negotiates first): refused as bad input either way.
    assert broke_the_rule(APIClient().get("/v1/traces?format=xml"), "format") is None
