"""/v1/graph routes."""

from django.urls import path

from graph_app.api import views
from graph_app.api.compile import ContextCompileView

urlpatterns = [
    path("graph/facts", views.FactListCreateView.as_view(), name="graph-facts"),
    path("graph/facts/<str:fact_id>", views.FactDetailView.as_view(), name="graph-fact"),
    path(
        "graph/facts/<str:fact_id>/retract",
        views.FactRetractView.as_view(),
        name="graph-fact-retract",
    ),
    path("graph/episodes", views.EpisodeListCreateView.as_view(), name="graph-episodes"),
    path(
        "graph/episodes/<str:episode_id>", views.EpisodeDetailView.as_view(), name="graph-episode"
    ),
    path("graph/entities", views.EntityListView.as_view(), name="graph-entities"),
    path("graph/entities/<path:entity_id>", views.EntityDetailView.as_view(), name="graph-entity"),
    path("graph/time-travel", views.TimeTravelView.as_view(), name="graph-time-travel"),
    path("graph/integrity", views.IntegrityView.as_view(), name="graph-integrity"),
    path("graph/compile", ContextCompileView.as_view(), name="graph-compile"),
]
