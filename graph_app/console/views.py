"""The memory browser's pages: thin adapters over graph_app.console.selectors.

Staff only (the admin's own login), and only for users who may view entities. A bad query
string answers the page with the rule it broke (400); an unknown entity is a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from graph_app.console.contracts import EntityBrowseInput, EntityListInput
from graph_app.console.selectors import entities_for_browser, entity_for_browser, entity_page
from memoryproject.contracts import Input
from memoryproject.errors import ApplicationError, NotFoundError

VIEW_PERMISSION = "graph_app.view_entity"

View = Callable[..., HttpResponse]
InputT = TypeVar("InputT", bound=Input)


def browser_view(view: View) -> View:
    """Behind the admin's login, for users who may view entities."""

    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm(VIEW_PERMISSION):
            raise PermissionDenied("viewing entities is not permitted")
        return view(request, *args, **kwargs)

    return admin.site.admin_view(guarded)


def _page_context(request: HttpRequest, title: str, form: tuple[str, ...]) -> dict[str, Any]:
    """The admin's context for a browser page, with the query's ``form`` fields as given."""
    return {
        **admin.site.each_context(request),
        "title": title,
        "form": {name: request.GET.get(name, "") for name in form},
    }


def _parsed(request: HttpRequest, model: type[InputT]) -> InputT:
    """The query string as ``model``'s input (its fields not given keep their defaults)."""
    given = {name: request.GET[name] for name in model.model_fields if name in request.GET}
    return model.parse(given, strict=False)


def _link(request: HttpRequest, **changes: object) -> str:
    """This page's query string with ``changes`` applied."""
    query = request.GET.copy()
    for name, value in changes.items():
        query[name] = str(value)
    return "?" + urlencode(sorted(query.items()))


def _page_links(request: HttpRequest, page: Any, name: str) -> dict[str, str]:
    links = {}
    if page.has_previous():
        links["previous"] = _link(request, **{name: page.previous_page_number()})
    if page.has_next():
        links["next"] = _link(request, **{name: page.next_page_number()})
    return links


@browser_view
def entity_detail(request: HttpRequest, project: str, entity: str) -> HttpResponse:
    context = _page_context(request, entity, ("as_of", "known_at"))
    try:
        found = entity_for_browser(project_slug=project, entity_slug=entity)
    except NotFoundError as exc:
        raise Http404(exc.message) from None
    context["entity"] = found
    try:
        params = _parsed(request, EntityBrowseInput)
    except ApplicationError as exc:
        context["error"] = exc.message
        return render(request, "console/entity.html", context, status=400)
    page = entity_page(entity=found, params=params)
    context.update(
        page=page,
        fact_links=_page_links(request, page.facts, "facts_page"),
        history_links=_page_links(request, page.history, "history_page"),
        episode_links=_page_links(request, page.episodes, "episodes_page"),
    )
    return render(request, "console/entity.html", context)


@browser_view
def entity_list(request: HttpRequest) -> HttpResponse:
    context = _page_context(request, "Memory browser", ("project", "q"))
    try:
        params = _parsed(request, EntityListInput)
    except ApplicationError as exc:
        context["error"] = exc.message
        return render(request, "console/entities.html", context, status=400)
    page, projects = entities_for_browser(params=params)
    context.update(page=page, projects=projects, links=_page_links(request, page, "page"))
    return render(request, "console/entities.html", context)
