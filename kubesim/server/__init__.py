"""The HTTP side of kubesim: an aiohttp application serving the Kubernetes REST API."""
