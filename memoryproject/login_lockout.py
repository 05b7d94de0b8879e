"""The page a locked-out console login gets (django-axes calls ``lockout_response``).

It says what happened and for how long, in the console's own layout, with status 429 and
``Retry-After``: too many wrong passwords for this username from this address, so even the
right one is refused until the cool-off has passed without another try (each try during the
lockout starts the wait again). Nothing on it tells whether the username exists."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

STATUS = 429


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any
) -> HttpResponse:
    cooloff = settings.AXES_COOLOFF_TIME
    seconds = int(cooloff.total_seconds())
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    context = {
        **admin.site.each_context(request),
        "title": "Login refused",
        "username": str(username)[:150],
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cooloff_minutes": max(1, seconds // 60),
    }
    response = TemplateResponse(request, "admin/login_locked.html", context, status=STATUS)
    response["Retry-After"] = str(seconds)
    return response.render()
