"""The memory browser's pages, under /console/graph/. Entity ids may hold '/', so the entity
is the path's last part."""

from __future__ import annotations

from django.urls import path

from graph_app.console import views

app_name = "memory_browser"

urlpatterns = [
    path("", views.entity_list, name="entities"),
    path("<str:project>/<path:entity>/", views.entity_detail, name="entity"),
]
