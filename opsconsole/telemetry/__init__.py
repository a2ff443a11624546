"""Process-level telemetry: the TracerProvider (database span store, OTLP when configured) and /metrics.

Engine code only uses the OpenTelemetry and prometheus-client APIs; this package decides, once per process
(web, worker child, controller), where spans and samples go. Nothing configured costs nothing.
"""
