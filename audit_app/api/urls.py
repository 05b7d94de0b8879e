"""/v1 routes of the audit trail."""

from django.urls import path

from audit_app.api import views

urlpatterns = [
    path(
        "graph/audit/contradictions",
        views.ContradictionAuditView.as_view(),
        name="graph-audit-contradictions",
    ),
]
