"""Helpers the tests share: real worker processes, database URLs for subprocesses, waiting."""
