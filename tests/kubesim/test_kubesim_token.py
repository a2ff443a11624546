"""kubesim without --token keeps the token it minted in its data dir across restarts (clients keep working)."""

from __future__ import annotations

import os
import stat

from kubesim.cli import build_parser, options_from_args


def _token(*argv: str) -> str | None:
    return options_from_args(build_parser().parse_args(list(argv))).token


def test_a_generated_token_is_stored_in_the_data_dir_and_reused(tmp_path) -> None:
    data = tmp_path / "data"
    first = _token("--data-dir", str(data))
    assert first and (data / "token").read_text().strip() == first
    assert stat.S_IMODE(os.stat(data / "token").st_mode) == 0o600
    assert _token("--data-dir", str(data)) == first  # the restart
    assert _token("--data-dir", str(data), "--token", "given") == "given"  # --token still wins
    assert _token("--data-dir", str(data)) == first


def test_without_a_data_dir_each_start_mints_a_new_token() -> None:
    assert _token() != _token()
