"""Errors of the /v1 API answer JSON, whatever raised them; the browser pages' login and
messages middleware leave /v1 requests alone.

DRF renders the errors of its views (memoryproject.drf.exception_handler), but some answers are
made before or after a view runs: an unknown path (404), a body over the size limit (413), a NUL
character in the URL (which PostgreSQL could not look up), or an unexpected exception (500). This
middleware gives those the same ``{"code", "message", "fields"?}`` shape; a 500 says nothing of
its cause (the traceback goes to the log), even with DEBUG on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.utils.deprecation import MiddlewareMixin

from memoryproject.admin_discovery import admin_discover
from memoryproject.errors import error_body

logger = logging.getLogger("django.request")

API_PREFIX = "/v1/"


def _too_large() -> JsonResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return JsonResponse(
        error_body(413, f"body: must be at most {limit} bytes", "body"),
        status=413,
    )


def _content_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _nul_in_url(request: HttpRequest) -> str | None:
    """The part of the URL holding a NUL character (the path or a query parameter), if any."""
    if "\x00" in request.path:
        return "path"
    for key, values in request.GET.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            return key.replace("\x00", "") or "query"
    return None


class JsonErrorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and _content_length(request) > limit:
            return _too_large()
        where = _nul_in_url(request)
        if where is not None:
            message = f"{where}: must not contain NUL characters"
            return JsonResponse(error_body(400, message, where), status=400)
        response = self.get_response(request)
        if response.status_code >= 400 and "json" not in response.get("Content-Type", ""):
            return self._as_json(response)
        return response

    @staticmethod
    def _as_json(response: HttpResponse) -> HttpResponse:
        status = response.status_code
        messages = {
            404: "no such endpoint; see /v1/docs/ for the API",
            405: "method not allowed here; see /v1/docs/ for the API",
            413: f"body: must be at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes",
        }
        message = messages.get(status) or (
            "internal error; the server log has the details"
            if status >= 500
            else f"the request was refused ({response.reason_phrase})"
        )
        answer = JsonResponse(error_body(status, message), status=status)
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                answer[header] = response[header]
        return answer

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIX):
            return None
        if isinstance(exception, RequestDataTooBig):
            return _too_large()
        logger.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=(type(exception), exception, exception.__traceback__),
            extra={"status_code": 500, "request": request},
        )
        return JsonResponse(
            error_body(500, "internal error; the server log has the details"), status=500
        )


class BrowserOnly(MiddlewareMixin):
    """Mixin for middleware that serves the browser pages only (the console's and the admin's
    login and messages). A /v1 request is authenticated by its API key and reads neither, so it
    goes straight past: the two cost 5.2 % of a plan's instructions (200 plans through the WSGI
    handler under callgrind, 7.19 M against 6.82 M each). Sessions and CSRF stay Django's own
    middleware, which the deploy checks look for by name (session cookie flags, CSRF); they
    cost a /v1 request little (0.5 %), and /v1 views are exempt from CSRF."""

    async_mode: bool  # set by MiddlewareMixin (the stubs leave it out)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if request.path_info.startswith(API_PREFIX) and not self.async_mode:
            return self.get_response(request)
        return super().__call__(request)


class AdminDiscoveryMiddleware(BrowserOnly):
    """A browser page's request finds the admin's modules discovered (in a server that defers
    it, the first such request discovers them: memoryproject.admin_discovery)."""

    def process_request(self, request: HttpRequest) -> None:
        admin_discover()


class AuthenticationMiddleware(BrowserOnly, auth.AuthenticationMiddleware):
    pass


class MessageMiddleware(BrowserOnly, messages.MessageMiddleware):
    pass
