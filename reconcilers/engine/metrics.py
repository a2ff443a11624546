"""Every metric opsconsole exports, defined in one place.

Names, labels and buckets follow controller-runtime (and client-go's workqueue and leader election), so the
Grafana dashboards users already run for Go operators work unchanged; ours are prefixed `operator_` and
`opsconsole_` (`opsconsole_resources` is not a stored gauge: `reconcilers.engine.resources_gauge` counts the
Resource table when scraped). Labels never carry a resource name: only the controller (the kind, lower-cased),
results, phases, reasons, HTTP codes and methods, all bounded sets. `label_pairs_init()` makes every known label pair
exist at 0 before the first event, as controller-runtime does.

In Celery's prefork pool every child writes its samples to PROMETHEUS_MULTIPROC_DIR; gauges declare how
the worker's main process aggregates them (`multiprocess_mode`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import Counter, Gauge, Histogram

# controller-runtime's reconcile time buckets (pkg/internal/controller/metrics).
RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)
# client-go workqueue buckets: prometheus.ExponentialBuckets(10e-9, 10, 12).
# Written out exactly (10e-9 * 10**i accumulates float noise into the `le` labels).
WORKQUEUE_BUCKETS = (1e-08, 1e-07, 1e-06, 1e-05, 0.0001, 0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
# Time spent in a phase: from seconds to a week.
TIME_IN_PHASE_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, 604800)

RESULTS = ("success", "error", "requeue", "requeue_after")
#: the `from` label of a resource's first transition (it had no phase before)
NO_PHASE = ""

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total", "Total number of reconciliations per controller",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller",
    ["controller"],
)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller", ["controller"],
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
    ["controller"], buckets=RECONCILE_TIME_BUCKETS,
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers", "Number of currently used workers per controller",
    ["controller"], multiprocess_mode="livesum",
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller",
    ["controller"], multiprocess_mode="livesum",
)

WORKQUEUE_DEPTH = Gauge(
    "workqueue_depth", "Current depth of workqueue", ["name", "controller"], multiprocess_mode="livemax",
)
WORKQUEUE_ADDS = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", ["name", "controller"])
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"], buckets=WORKQUEUE_BUCKETS,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes",
    ["name", "controller"], buckets=WORKQUEUE_BUCKETS,
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries_total", "Total number of retries handled by workqueue", ["name", "controller"],
)
WORKQUEUE_UNFINISHED_WORK = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
    ["name", "controller"], multiprocess_mode="livesum",
)
WORKQUEUE_LONGEST_RUNNING = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name", "controller"], multiprocess_mode="livemax",
)

REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total", "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)
LEADER_ELECTION_MASTER = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
    ["name"], multiprocess_mode="livemax",
)
SHARD_KEYS = Gauge(
    "opsconsole_shard_keys",
    "Keys a controller shard acts on (state=owned) and keys handed to it that wait for their previous owner to stop "
    "(state=pending), by shard id", ["shard", "state"], multiprocess_mode="livemax",
)
SHARD_HANDOVERS = Counter(
    "opsconsole_shard_handover_keys_total", "Keys handed over to a controller shard and enqueued by it (joins, "
    "leaves, and keys placed on another shard as the key set changed)", ["shard"],
)

SHARD_LABEL_PATCHES = Counter(
    "opsconsole_shard_label_patches_total", "Label patches of reconciled objects by the controller shards' label "
    "mode (action=label: a new object; relabel: an owner not live, or forged; drain: a live owner asked to let go; "
    "release: a shard letting go of a drained object), by the shard that sent them", ["shard", "action"],
)
SHARD_CACHED = Gauge(
    "opsconsole_shard_cached_objects", "Objects of the reconciled kinds in a controller shard's informer caches (with "
    "--shard-informers labels, its own only)", ["shard"], multiprocess_mode="livemax",
)

INFORMER_RESTARTS = Counter(
    "opsconsole_informer_restarts_total",
    "Times an informer had to watch or list again, by why its last request ended: ended (the server closed the "
    "watch), broken (the connection dropped mid-stream), expired (410 Gone: re-list), error (a failed request, "
    "backed off)",
    ["resource", "reason"],
)
#: the `reason` label values of opsconsole_informer_restarts_total
INFORMER_RESTART_REASONS = ("ended", "broken", "expired", "error")
RESYNC_KEYS = Counter(
    "opsconsole_resync_keys_total", "Keys the controller enqueued again without an event, by kind: the periodic "
    "resync (spread over its period) and the full resync after a workqueue outage", ["kind"],
)
THREAD_RESTARTS = Counter(
    "opsconsole_thread_restarts_total",
    "Times a supervised background thread (lease renewals, the controller's archive and healing steps, informers) "
    "died or ended and was started again (reconcilers.engine.supervise)", ["thread"],
)

OBJECT_READS = Counter(
    "opsconsole_object_reads_total", "How runs read their object: cache (the controller's object cache), api (a GET: "
    "nothing cached, or the cache is off or being deleted), stale (cached, but older than the record: read again "
    "with a GET)", ["controller", "source"],
)
OBJECT_CACHE_SKIPPED = Counter(
    "opsconsole_object_cache_skipped_total", "Objects the controller did not put into the object cache because it "
    "held its cap of entries (OPSCONSOLE_OBJECT_CACHE_MAX_ENTRIES): their runs GET them", ["name"],
)
CHILD_APPLIES = Counter(
    "opsconsole_child_applies_total", "Children applied by runs: applied (a server-side apply sent), unchanged (the "
    "object cache showed the apply would change nothing: not sent)", ["controller", "result"],
)
RECONCILE_FAILURES = Counter(
    "operator_reconcile_failures_total", "Reconciles that failed, by controller and reason", ["controller", "reason"],
)
TRANSITIONS = Counter(
    "opsconsole_transitions_total", "Recorded phase transitions, by kind and from/to phase", ["kind", "from", "to"],
)
TIME_IN_PHASE = Histogram(
    "opsconsole_time_in_phase_seconds", "How long resources stayed in a phase before leaving it",
    ["kind", "phase"], buckets=TIME_IN_PHASE_BUCKETS,
)
PHASE_SECONDS = Histogram(
    "opsconsole_phase_seconds", "Time spent per phase, by kind, observed when a transition leaves the phase: the "
    "service level indicator of the kinds' phase objectives (reconcilers.engine.slo; an objective's bound is one "
    "of these buckets)", ["kind", "phase"], buckets=TIME_IN_PHASE_BUCKETS,
)
RECONCILE_TRIGGERS = Counter(
    "opsconsole_reconcile_triggers_total", "Why keys were enqueued, by controller and trigger (watch, created, "
    "deleted, child, manual, resync, rollback, requeue_<reason>; reconcilers.engine.triggers.label)",
    ["kind", "trigger"],
)
ANOMALIES = Counter(
    "opsconsole_anomalies_total", "Anomalies detected, by kind and rule (rollback_failed: a rollback that failed or "
    "could not be done, escalated to a person)", ["kind", "rule"],
)
ANOMALIES_ACTIVE = Gauge(
    "opsconsole_anomalies_active", "Resources a rule matches now, by kind and rule", ["kind", "rule"],
    multiprocess_mode="livemax",
)
ROLLBACKS = Counter(
    "opsconsole_rollbacks_total", "Rollbacks to an earlier generation's spec, by kind and what became of them "
    "(started, succeeded, failed, refused)", ["kind", "result"],
)
SUSPENDED = Gauge(
    "opsconsole_resources_suspended", "Resources whose reconciles are suspended, by kind", ["kind"],
    multiprocess_mode="livemax",
)
ANOMALIES_UNACKNOWLEDGED = Gauge(
    "opsconsole_anomalies_unacknowledged_seconds", "Age of the oldest anomaly that needs a person (rollback_failed, "
    "a rule that does not roll back, or automatic rollback off) and that nobody acknowledged, by kind (0: none)",
    ["kind"], multiprocess_mode="livemax",
)
#: the `result` label values of opsconsole_rollbacks_total
ROLLBACK_RESULTS = ("started", "succeeded", "failed", "refused")
#: the anomaly rule the engine raises itself when a rollback fails or cannot be done
ROLLBACK_FAILED_RULE = "rollback_failed"


def healing_label_pairs_init(kind: str, rules: Iterable[str]) -> None:
    """Every healing label pair of one kind at 0: its rules (and rollback_failed), the rollback results."""
    for rule in (*rules, ROLLBACK_FAILED_RULE):
        ANOMALIES.labels(kind, rule)
        ANOMALIES_ACTIVE.labels(kind, rule)
    for result in ROLLBACK_RESULTS:
        ROLLBACKS.labels(kind, result)
    SUSPENDED.labels(kind)
    ANOMALIES_UNACKNOWLEDGED.labels(kind)


def label_pairs_init(
    controller: str,
    kind: str,
    states: Iterable[str],
    transitions: Iterable[tuple[str, str]],
    failure_reasons: Iterable[str] = (),
    *,
    queue: str | None = None,
) -> None:
    """Create every label pair of one controller at 0, so dashboards and rate() see them from the start.

    `queue` is the workqueue's `name` label (default: the controller name, as controller-runtime names its
    queues after the controller)."""
    name = queue or controller
    for result in RESULTS:
        RECONCILE_TOTAL.labels(controller, result)
    RECONCILE_ERRORS.labels(controller)
    TERMINAL_RECONCILE_ERRORS.labels(controller)
    RECONCILE_TIME.labels(controller)
    ACTIVE_WORKERS.labels(controller)
    for metric in (WORKQUEUE_ADDS, WORKQUEUE_RETRIES, WORKQUEUE_QUEUE_DURATION, WORKQUEUE_WORK_DURATION):
        metric.labels(name, controller)
    for reason in failure_reasons:
        RECONCILE_FAILURES.labels(controller, reason)
    for state in states:
        TIME_IN_PHASE.labels(kind, state)
        PHASE_SECONDS.labels(kind, state)
    for source, target in transitions:
        TRANSITIONS.labels(kind, source, target)


def machine_transitions(machine: object) -> list[tuple[str, str]]:
    """Every (from, to) pair a state machine allows, plus the first one (no phase → initial)."""
    states: Sequence[str] = tuple(getattr(machine, "states", ()))
    pairs = [(NO_PHASE, str(getattr(machine, "initial", "")))]
    allows = getattr(machine, "allows", None)
    for source in states:
        for target in states:
            if source != target and allows is not None and allows(source, target):
                pairs.append((source, target))
    return pairs


#: the failure reasons every controller reports (operator_reconcile_failures_total{reason})
FAILURE_REASONS = ("TemporaryError", "PermanentError", "Exception", "StatusConflict", "LeaseLost", "ApiError")


def failure_reason(error_class: str) -> str:
    """The bounded `reason` label of a failed run: its error class when it is one we name, else `Exception`
    (an arbitrary exception class name could grow the label set without bound)."""
    if error_class in FAILURE_REASONS:
        return error_class
    if error_class.endswith("ApiException") or error_class == "ApiException":
        return "ApiError"
    return "Exception"


def reconciler_label_pairs_init(reconciler: object) -> None:
    """label_pairs_init for one registered reconciler (its name, kind, states and allowed transitions)."""
    machine = getattr(reconciler, "state_machine", None)
    resource = getattr(reconciler, "resource", None)
    label_pairs_init(
        str(getattr(reconciler, "name", "")),
        str(getattr(resource, "kind", "")),
        tuple(getattr(machine, "states", ())),
        machine_transitions(machine) if machine is not None else [],
        FAILURE_REASONS,
    )


def child_applies_observed(controller: str, applied: int, unchanged: int) -> None:
    """Count a run's children: `applied` server-side applies sent, `unchanged` skipped (the object cache showed they
    would change nothing), in opsconsole_child_applies_total."""
    for result, count in (("applied", applied), ("unchanged", unchanged)):
        if count:
            CHILD_APPLIES.labels(controller, result).inc(count)


def reconcile_observed(controller: str, result: str, seconds: float, queued_seconds: float,
                       error_class: str = "") -> None:
    """controller-runtime's reconcile and workqueue metrics for one finished run, and ours for failures."""
    RECONCILE_TOTAL.labels(controller, result).inc()
    RECONCILE_TIME.labels(controller).observe(seconds)
    if result == "error":
        RECONCILE_ERRORS.labels(controller).inc()
        RECONCILE_FAILURES.labels(controller, failure_reason(error_class)).inc()
        if error_class == "PermanentError":
            TERMINAL_RECONCILE_ERRORS.labels(controller).inc()
    WORKQUEUE_QUEUE_DURATION.labels(controller, controller).observe(max(0.0, queued_seconds))
    WORKQUEUE_WORK_DURATION.labels(controller, controller).observe(seconds)
