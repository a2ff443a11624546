"""Set up OpenTelemetry tracing for one process: spans go to the database span store and, when
OTEL_EXPORTER_OTLP_ENDPOINT is set, to an OTLP collector too. OPSCONSOLE_TRACING=off leaves the API's
no-op tracer in place (zero cost).
"""

from __future__ import annotations

import atexit
import os
import threading

from django.conf import settings
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from opsconsole.telemetry.spanstore import DatabaseSpanProcessor

_lock = threading.Lock()
_provider: TracerProvider | None = None
_store: DatabaseSpanProcessor | None = None


def tracing_enabled() -> bool:
    """Tracing is on unless OPSCONSOLE_TRACING says off."""
    return str(getattr(settings, "OPSCONSOLE_TRACING", "on")).lower() not in {"0", "off", "false", "no"}


def tracing_setup(service: str) -> TracerProvider | None:
    """Install this process's TracerProvider once (later calls return it); None when tracing is off."""
    global _provider, _store
    with _lock:
        if _provider is not None and getattr(_provider, "_opsconsole_pid", None) == os.getpid():
            return _provider
        if not tracing_enabled():
            return None
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        _store = DatabaseSpanProcessor()
        provider.add_span_processor(_store)
        endpoint = getattr(settings, "OTEL_EXPORTER_OTLP_ENDPOINT", None)
        if endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        provider._opsconsole_pid = os.getpid()  # type: ignore[attr-defined]
        trace.set_tracer_provider(provider)
        # set_tracer_provider refuses a second provider (e.g. after fork); make ours current regardless.
        trace._TRACER_PROVIDER = provider  # type: ignore[attr-defined]
        _provider = provider
        atexit.register(provider.shutdown)
        return provider


def span_store() -> DatabaseSpanProcessor | None:
    """This process's database span processor, when tracing is set up (tests flush it)."""
    return _store


def celery_instrument() -> None:
    """Carry the trace context through Celery task headers (publish side and worker side)."""
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    instrumentor = CeleryInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()
