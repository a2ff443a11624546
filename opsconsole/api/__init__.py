"""The REST API (Django REST framework) under /api/v1/, and the health probes."""
