"""Routes of the audit console's own pages (mounted under /console/)."""

from django.urls import path

from audit_app.console import views

app_name = "audit_console"

urlpatterns = [
    path("dashboard/", views.dashboard, name="dashboard"),
    path("dashboard/chain/", views.dashboard_chain, name="dashboard-chain"),
]
