"""The console's front door: login page, the overview behind it, and the health probe."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client


def test_healthz_answers_without_login(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_the_overview_sends_an_anonymous_visitor_to_the_login_page(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert b'name="password"' in page.content
    assert "script-src 'self'" in page["Content-Security-Policy"]


@pytest.mark.django_db
def test_the_demo_admin_command_prints_a_login_that_works(client: Client, settings, tmp_path, capsys) -> None:
    settings.DATA_DIR = tmp_path
    call_command("demo_admin")
    line = capsys.readouterr().out.strip()
    fields = dict(part.split("=", 1) for part in line.removeprefix("demo login: ").split())
    assert get_user_model().objects.get(username=fields["username"]).is_superuser
    response = client.post("/login/", {"username": fields["username"], "password": fields["password"]})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    call_command("demo_admin")
    assert capsys.readouterr().out.strip() == line
