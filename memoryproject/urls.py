"""URL map. Each app contributes its /v1 routes from its api/urls.py."""

from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from memoryproject import views
from memoryproject.admin_discovery import admin_urls

v1: list[URLPattern | URLResolver] = [
    path("projects", views.ProjectListView.as_view(), name="project-list"),
    path("", include("sessions_app.api.urls")),
    path("", include("graph_app.api.urls")),
    path("", include("audit_app.api.urls")),
    path(
        "schema/",
        SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[AllowAny]),
        name="schema",
    ),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(
            url_name="schema", authentication_classes=[], permission_classes=[AllowAny]
        ),
        name="docs",
    ),
]

# The API first: the resolver tries the patterns in turn, and nearly every request is a /v1 one.
urlpatterns = [
    path("v1/", include(v1)),
    path("", views.landing, name="landing"),
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin_urls()),
    path("console/", include("audit_app.console.urls")),
    path("console/graph/", include("graph_app.console.urls")),
]
