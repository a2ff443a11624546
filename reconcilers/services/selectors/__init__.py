"""Selectors: the reads the API and the console share (`<entity>_<action>`), each returning querysets or
plain data already limited to the namespaces the caller may see (`namespaces=None`: no limit)."""
