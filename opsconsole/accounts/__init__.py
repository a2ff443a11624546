"""Accounts of the API and the console: roles (Django groups), per-user API tokens, namespace grants, and the
append-only record of every action asked of the API (allowed or refused)."""
