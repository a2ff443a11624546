"""Benchmarks of the webhook server (`manage.py runwebhooks`)."""
