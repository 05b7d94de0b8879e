"""/v1 routes of session memory."""

from django.urls import path

from sessions_app.api import views

urlpatterns = [
    path("traces", views.TraceListCreateView.as_view(), name="trace-list"),
    path("traces/<str:trace_id>", views.TraceDetailView.as_view(), name="trace-detail"),
    path("plan", views.PlanView.as_view(), name="plan"),
    path("sessions/save", views.SessionSaveView.as_view(), name="session-save"),
    path("sessions/load", views.SessionLoadView.as_view(), name="session-load"),
]
