"""Console views: thin, each renders what selectors return."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """The landing page: the registered kinds and where to go next."""
    return render(request, "console/overview.html", {"reconcilers": settings.OPSCONSOLE_RECONCILERS})
