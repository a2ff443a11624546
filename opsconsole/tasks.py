"""Project-level Celery tasks: a smoke task that proves a worker is alive and wired to the broker."""

import gc
import os
import socket

from celery import shared_task


@shared_task(name="opsconsole.ping")
def ping(payload: str = "ping") -> dict[str, object]:
    """Answer with the payload echoed back, the identity of the worker that ran it, and how many of its start-up
    objects it keeps out of the garbage collector's reach (`opsconsole.gcsettle`)."""
    return {"echo": payload, "hostname": socket.gethostname(), "pid": os.getpid(), "gc_frozen": gc.get_freeze_count()}
