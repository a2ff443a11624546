"""Tooling for kind authors, used at development time and never by the running engine or the web console:
`scaffold` (what `manage.py startkind` generates), `testing` (the pytest plugin, public as `opsconsole.testing`)
and `processes` (the subprocess harness of that plugin, the project's tests and the benchmarks).

It sits at the top of the import layers beside the console and the API (pyproject.toml): it may use the
services, the engine and the contracts, and none of those may import it.
"""
