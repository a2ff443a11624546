"""Project-level Celery tasks: a smoke task that proves a worker is alive and wired to the broker."""

import os
import socket

from celery import shared_task


@shared_task(name="opsconsole.ping")
def ping(payload: str = "ping") -> dict[str, object]:
    """Answer with the payload echoed back and the identity of the worker that ran it."""
    return {"echo": payload, "hostname": socket.gethostname(), "pid": os.getpid()}
