"""The web console: server-rendered pages over the selectors and services."""
