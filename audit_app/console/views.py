"""The dashboard page, a thin adapter over ``dashboard_read`` for staff (admin login), and its
chain status, a fragment the page fetches: verifying walks the whole log, so the charts do not
wait for it.

Both read the injection log, so both need the permission to view it (``DASHBOARD_PERMISSION``:
the Compliance officer holds it); other staff get 403. Clients that are API keys show their
prefix only to people who may view the keys (memoryproject.entitlements)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from audit_app.console.selectors import PERIODS, dashboard_read
from audit_app.console_selectors import chain_status
from memoryproject.entitlements import may_see_key_prefixes
from memoryproject.models import Project

DASHBOARD_PERMISSION = "audit_app.view_injectionrecord"


class DashboardFilter(forms.Form):
    days = forms.TypedChoiceField(
        label="Period",
        choices=[(str(n), f"last {n} days") for n in PERIODS],
        coerce=int,
        required=False,
        initial="30",
    )
    project = forms.ModelChoiceField(
        label="Project",
        queryset=Project.objects.order_by("slug"),
        to_field_name="slug",
        required=False,
        empty_label="all projects",
    )


@staff_member_required
@permission_required(DASHBOARD_PERMISSION, raise_exception=True)
def dashboard(request: HttpRequest) -> HttpResponse:
    """Deliveries per day by status, the trust-score distribution, the share of ESCALATE,
    top clients, open reviews and findings and the chain status, for a period and project.
    A period or project that does not exist answers 400 with the form saying which."""
    form = DashboardFilter(request.GET or None)
    valid = form.is_valid() if request.GET else True
    data = form.cleaned_data if request.GET and valid else {}
    board = dashboard_read(
        days=data.get("days") or 30,
        project=data.get("project"),
        key_prefixes=may_see_key_prefixes(request.user),
    )
    context = {
        **admin.site.each_context(request),
        "title": "Dashboard",
        "form": form if request.GET else DashboardFilter(initial={"days": "30"}),
        "board": board,
        "chart_data": board.chart_data(),
    }
    return render(request, "console/dashboard.html", context, status=200 if valid else 400)


@staff_member_required
@permission_required(DASHBOARD_PERMISSION, raise_exception=True)
def dashboard_chain(request: HttpRequest) -> HttpResponse:
    """The chain status (verified now against the head and the latest checkpoint) as the
    dashboard shows it; also a page of its own for browsers without JavaScript."""
    return render(request, "console/_chain_status.html", {"chain": chain_status()})
