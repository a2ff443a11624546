"""Which reconciles are traced: head sampling that pays for itself, and the runs always kept.

A trace costs the worker its spans (one per API call, the step, the record) and the span store a row each. Most
reconciles of a healthy fleet say nothing a metric does not, so the engine traces a share of them, decided once
at the root of the trace (`ReconcileSampler`: a parent's decision is followed, a root is sampled by its trace id
with `OPSCONSOLE_TRACE_SAMPLE_RATIO`); an unsampled run's spans are the API's no-op spans, which cost nothing.

The runs a person will look for are always kept: a run that ended in an error, a slow one (over
`OPSCONSOLE_TRACE_SLOW_SECONDS`) and one that handled a manual reconcile request. When such a run was not sampled,
`keep_unsampled` writes one span for it after the fact (its start time, duration, result, error and the
request's token), in a trace of its own that the run's record links to: one span that says as much as the
tree would have about what happened, where the tree was not paid for.

The sampler honours `KEEP_ATTRIBUTE` on a root span: whoever starts a span that must be kept says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

#: on a root span's start attributes: sample this trace whatever the ratio says
KEEP_ATTRIBUTE = "opsconsole.trace.keep"


class ReconcileSampler(Sampler):
    """ParentBased(TraceIdRatioBased(ratio)), except that a root span carrying `KEEP_ATTRIBUTE` is sampled."""

    def __init__(self, ratio: float) -> None:
        self.ratio = min(1.0, max(0.0, float(ratio)))
        self._delegate = ParentBased(TraceIdRatioBased(self.ratio))

    def should_sample(self, parent_context: otel_context.Context | None, trace_id: int, name: str,
                      kind: SpanKind | None = None, attributes: Attributes = None,
                      links: Sequence[Link] | None = None, trace_state: TraceState | None = None) -> SamplingResult:
        """Sampled when kept by attribute, else as the parent or the ratio says."""
        if attributes and attributes.get(KEEP_ATTRIBUTE):
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes,
                                  trace.get_current_span(parent_context).get_span_context().trace_state)
        return self._delegate.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        """As OpenTelemetry's samplers describe themselves."""
        return f"ReconcileSampler{{ratio={self.ratio}}}"


def sampled_trace_id(span: Any) -> str:
    """The span's trace id (32 hex digits) when its trace is sampled (its spans are stored), else ''."""
    context = span.get_span_context()
    return format(context.trace_id, "032x") if context.is_valid and context.trace_flags.sampled else ""


def why_keep(result: str, duration: float, slow_seconds: float, handled_request: bool) -> str:
    """Why an unsampled run must be kept ('' when it need not be): error, slow, request."""
    if result == "error":
        return "error"
    if handled_request:
        return "request"
    if slow_seconds > 0 and duration >= slow_seconds:
        return "slow"
    return ""


_tracers: dict[tuple[Any, str], trace.Tracer] = {}


def tracer(name: str) -> trace.Tracer:
    """`trace.get_tracer(name)`, made once per tracer provider: the SDK builds a new Tracer (its instrumentation
    scope and attributes) on every `get_tracer` call, which every run and every API call of it paid for."""
    provider = trace.get_tracer_provider()
    found = _tracers.get((provider, name))
    if found is None:
        found = _tracers[(provider, name)] = provider.get_tracer(name)
    return found


def keep_notable(name: str, start_time_ns: int, duration: float, slow_seconds: float, result: str, error_class: str,
                 token: str | None, attributes: Mapping[str, Any]) -> str:
    """Tail sampling of a run its head sampling left out: one that ended in an error, was slow (`slow_seconds`,
    0: never) or handled a manual request (`token`) gets its one span (`keep_unsampled`, named `name`, the token
    among its attributes); its trace id for the record, '' when it need not be kept or tracing is off."""
    why = why_keep(result, duration, slow_seconds, token is not None)
    if not why:
        return ""
    extra = {"opsconsole.request.token": token} if token else {}
    return keep_unsampled(name, start_time_ns, {**attributes, **extra}, why, error_class if result == "error" else "")


def keep_unsampled(name: str, start_time_ns: int, attributes: Mapping[str, Any], why: str,
                   error: str = "") -> str:
    """Write the one span of a run that was not sampled but must be kept (a root of its own trace, started at
    `start_time_ns`, ended now); its trace id, '' when tracing is off."""
    span = tracer("opsconsole.reconcilers").start_span(name, context=otel_context.Context(), start_time=start_time_ns,
                             attributes={**attributes, KEEP_ATTRIBUTE: why})
    try:
        if error:
            span.set_status(Status(StatusCode.ERROR, error))
        return sampled_trace_id(span)
    finally:
        span.end()
