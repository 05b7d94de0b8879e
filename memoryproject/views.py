"""Project-wide pages: the landing page, /healthz and the key's project list."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryproject.auth import api_key_of
from memoryproject.migration_state import migrations_pending
from memoryproject.projects import projects_visible_to


def landing(request: HttpRequest) -> HttpResponse:
    # No filesystem path of this machine appears: the page is public.
    return render(request, "landing.html", {"version": settings.VERSION})


def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        pending = migrations_pending(connection) > 0
        status, code = "ok", 200
    except Exception as exc:  # the probe must answer, whatever is wrong
        return JsonResponse(
            {
                "status": "error",
                "database": connection.vendor,
                "error": type(exc).__name__,
                "version": settings.VERSION,
            },
            status=503,
        )
    return JsonResponse(
        {
            "status": status,
            "database": connection.vendor,
            "pending_migrations": pending,
            "version": settings.VERSION,
        },
        status=code,
    )


class ProjectListView(APIView):
    """The projects the calling API key is bound to, with the key's scope."""

    @extend_schema(
        responses=inline_serializer(
            "ProjectList",
            {
                "scope": serializers.CharField(),
                "key_prefix": serializers.CharField(),
                "projects": serializers.ListField(child=serializers.DictField()),
            },
        )
    )
    def get(self, request: Request) -> Response:
        api_key = api_key_of(request)
        assert api_key is not None  # the default permission guarantees it
        return Response(
            {
                "scope": api_key.scope,
                "key_prefix": api_key.prefix,
                "projects": [
                    {"slug": p.slug, "name": p.name, "created_at": p.created_at}
                    for p in projects_visible_to(api_key)
                ],
            }
        )
