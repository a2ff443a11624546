"""`runcontroller --bootstrap` where there is no checkout: opsconsole installed from its wheel has no deploy/, so
the command says what to pass (`--crds DIR --samples DIR`, or `--install-crds --samples DIR`) instead of waiting for
the API and applying nothing; a folder given that is not one is refused naming its option. All before any
connection is tried (no API here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from reconcilers.management.controller_start import bootstrap_dirs


@pytest.fixture
def no_checkout(settings, tmp_path: Path) -> Path:
    """BASE_DIR as in an installed wheel: site-packages, with no deploy/ beside the packages."""
    settings.BASE_DIR = tmp_path / "site-packages"
    settings.BASE_DIR.mkdir()
    return tmp_path


def test_bootstrap_without_a_checkout_says_what_to_pass(no_checkout):
    with pytest.raises(CommandError) as refused:
        call_command("runcontroller", "--bootstrap", "--api-timeout", "0.1")
    message = str(refused.value)
    assert "deploy" in message and "--crds DIR --samples DIR" in message and "--install-crds --samples DIR" in message
    with pytest.raises(CommandError, match="--install-crds --samples DIR"):  # the samples' default is missing too
        call_command("runcontroller", "--bootstrap", "--install-crds", "--api-timeout", "0.1")


def test_a_folder_given_that_is_not_one_is_refused_naming_its_option(no_checkout):
    (no_checkout / "crds").mkdir()
    with pytest.raises(CommandError, match=r"^--samples .*nowhere: not a directory$"):
        call_command("runcontroller", "--bootstrap", "--crds", str(no_checkout / "crds"),
                     "--samples", str(no_checkout / "nowhere"), "--api-timeout", "0.1")
    with pytest.raises(CommandError, match=r"^--crds .*missing: not a directory$"):
        call_command("runcontroller", "--bootstrap", "--crds", str(no_checkout / "missing"),
                     "--samples", str(no_checkout / "crds"), "--api-timeout", "0.1")


def test_the_given_folders_are_used_and_a_checkout_defaults_to_its_deploy(no_checkout, settings):
    crds, samples = no_checkout / "crds", no_checkout / "samples"
    crds.mkdir(), samples.mkdir()
    assert bootstrap_dirs(crds, samples, generated=False) == (crds, samples)
    assert bootstrap_dirs(None, samples, generated=True) == (None, samples)  # the generated CRDs, no folder
    deploy = settings.BASE_DIR / "deploy"
    (deploy / "crds").mkdir(parents=True), (deploy / "samples").mkdir()
    assert bootstrap_dirs(None, None, generated=False) == (deploy / "crds", deploy / "samples")
