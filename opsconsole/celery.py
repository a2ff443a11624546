"""The Celery application shared by every worker process.

Reliability settings follow DESIGN.md §3 (at-least-once): late acks, reject on worker lost, prefetch 1,
JSON only, and a broker visibility timeout far longer than the longest task so that Redis never
redelivers a task that is still running.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")

app = Celery("opsconsole", include=["opsconsole.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
