"""What a kind declares about healing: its anomaly rules and whether (and how fast) it rolls back by itself.

Pure contracts (no Django): a kind sets `Reconciler.healing = Healing(...)`; the engine
(`reconcilers.engine.healing`) evaluates the rules over the record (the Events archive, the transitions, the
phase a resource is in and since when) and acts on them. Rules come from the kind, else from the settings'
defaults (`OPSCONSOLE_ANOMALY_RULES`), and `OPSCONSOLE_HEALING` overrides a kind's settings by kind name.

Four kinds of rule:
- `events`: at least `threshold` occurrences of Events whose type is in `types` and reason in `reasons`, about
  the object (`involved="self"`), its descendants (`"children"`) or either (`"any"`), within `window_seconds`;
- `flapping`: at least `threshold` transitions `from_phase` → `to_phase` within `window_seconds`;
- `stuck`: in `phase` for longer than `seconds`;
- `metrics`: a PromQL `query` returning one series per object (bound to it by `labels`: which result label holds
  the object's namespace and name) compared with `warning` and `critical` thresholds (`direction` "above" or
  "below"); it matches once the last `consecutive` evaluations (at most one every `every_seconds`) were all
  critical. A warning never matches. `latency_p99_rule` and `error_ratio_rule` build the usual two for the kind's
  Service (off unless a kind lists them). Nothing of the object is put into the query: no escaping to get wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

EVENTS, FLAPPING, STUCK, METRICS = "events", "flapping", "stuck", "metrics"
RULE_TYPES = (EVENTS, FLAPPING, STUCK, METRICS)
INVOLVED = ("self", "children", "any")
DIRECTIONS = ("above", "below")
#: what a metric rule's `labels` may bind: the object's field -> the result label holding it
BINDABLE = ("namespace", "name")
DEFAULT_LABELS: tuple[tuple[str, str], ...] = (("name", "name"), ("namespace", "namespace"))
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class RuleError(ValueError):
    """A rule or healing setting that cannot be used: the message names the field."""


@dataclass(frozen=True)
class AnomalyRule:
    """One anomaly rule (see the module docstring). `rollback`: whether a match may trigger an automatic
    rollback of a spec change (where the kind or the object enables it)."""

    name: str
    type: str
    window_seconds: float = 300.0
    threshold: int = 3
    reasons: tuple[str, ...] = ()
    types: tuple[str, ...] = ("Warning",)
    involved: str = "any"
    from_phase: str = ""
    to_phase: str = ""
    phase: str = ""
    seconds: float = 0.0
    rollback: bool = True
    query: str = ""
    warning: float | None = None
    critical: float | None = None
    direction: str = "above"
    consecutive: int = 3
    every_seconds: float = 30.0
    labels: tuple[tuple[str, str], ...] | Mapping[str, str] = DEFAULT_LABELS

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > 63:
            raise RuleError("name: required, at most 63 characters")
        if self.type not in RULE_TYPES:
            raise RuleError(f"{self.name}.type: must be one of {', '.join(RULE_TYPES)} (got {self.type!r})")
        if self.type == EVENTS and not self.reasons:
            raise RuleError(f"{self.name}.reasons: an events rule needs at least one reason")
        if self.type == EVENTS and self.involved not in INVOLVED:
            raise RuleError(f"{self.name}.involved: must be one of {', '.join(INVOLVED)} (got {self.involved!r})")
        if self.type == FLAPPING and not (self.from_phase and self.to_phase):
            raise RuleError(f"{self.name}.from_phase/to_phase: a flapping rule needs both")
        if self.type == STUCK and (not self.phase or self.seconds <= 0):
            raise RuleError(f"{self.name}.phase/seconds: a stuck rule needs a phase and seconds > 0")
        if self.type in (EVENTS, FLAPPING) and (self.window_seconds <= 0 or self.threshold < 1):
            raise RuleError(f"{self.name}.window_seconds/threshold: must be > 0 and >= 1")
        if self.type == METRICS:
            self._check_metrics()

    def _check_metrics(self) -> None:
        """A metric rule's own fields (see the module docstring); `labels` normalised to sorted pairs."""
        if not isinstance(self.query, str) or not self.query.strip():
            raise RuleError(f"{self.name}.query: a metrics rule needs a PromQL query")
        for field_name in ("warning", "critical"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise RuleError(f"{self.name}.{field_name}: a metrics rule needs a finite number (got {value!r})")
        if self.direction not in DIRECTIONS:
            raise RuleError(f"{self.name}.direction: must be one of {', '.join(DIRECTIONS)} (got {self.direction!r})")
        assert self.warning is not None and self.critical is not None  # checked above
        if (self.critical < self.warning) if self.direction == "above" else (self.critical > self.warning):
            raise RuleError(f"{self.name}.warning/critical: with direction {self.direction!r} critical "
                            f"({self.critical:g}) must not be {'below' if self.direction == 'above' else 'above'} "
                            f"warning ({self.warning:g})")
        if isinstance(self.consecutive, bool) or not isinstance(self.consecutive, int) or self.consecutive < 1:
            raise RuleError(f"{self.name}.consecutive: must be an integer >= 1 (got {self.consecutive!r})")
        if isinstance(self.every_seconds, bool) or not isinstance(self.every_seconds, int | float) \
                or not 0 <= self.every_seconds < math.inf:
            raise RuleError(f"{self.name}.every_seconds: must be a number >= 0 (got {self.every_seconds!r})")
        pairs = self.labels.items() if isinstance(self.labels, Mapping) else self.labels
        try:
            bound = {str(k): v for k, v in pairs}
        except (TypeError, ValueError):
            raise RuleError(f"{self.name}.labels: a mapping of the object's field to a result label, e.g. "
                            '{"namespace": "namespace", "name": "service"}') from None
        for key, label in bound.items():
            if key not in BINDABLE:
                raise RuleError(f"{self.name}.labels.{key}: unknown (known: {', '.join(BINDABLE)})")
            if not isinstance(label, str) or not LABEL_NAME.match(label):
                raise RuleError(f"{self.name}.labels.{key}: {label!r} is not a Prometheus label name")
        if "name" not in bound:
            raise RuleError(f"{self.name}.labels.name: required: the result label that holds the object's name")
        object.__setattr__(self, "labels", tuple(sorted(bound.items())))

    @property
    def label_map(self) -> dict[str, str]:
        """A metric rule's `labels` as a dict: the object's field -> the result label holding it."""
        return dict(self.labels.items() if isinstance(self.labels, Mapping) else self.labels)

    def severity(self, value: float) -> str:
        """A metric rule's verdict on one value: "critical", "warning" or "ok" (strictly past a threshold)."""
        past = (lambda v, t: v > t) if self.direction == "above" else (lambda v, t: v < t)
        if self.critical is not None and past(value, self.critical):
            return "critical"
        if self.warning is not None and past(value, self.warning):
            return "warning"
        return "ok"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnomalyRule:
        """A rule from settings (a dict with the field names; lists for the tuples)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RuleError(f"{data.get('name', '?')}.{unknown[0]}: unknown field (known: {', '.join(sorted(known))})")
        values = {k: tuple(v) if isinstance(v, list | tuple) and k != "labels" else v for k, v in data.items()}
        try:
            return cls(**values)
        except TypeError as exc:
            raise RuleError(f"{data.get('name', '?')}: {exc}") from exc

    def describe(self) -> str:
        """One line saying what the rule matches."""
        if self.type == EVENTS:
            about = {"self": "the object", "children": "its children", "any": "the object or its children"}
            kinds = "/".join(self.types) if self.types else "any"
            return (f">= {self.threshold} {kinds} events ({'/'.join(self.reasons)}) about {about[self.involved]} "
                    f"in {self.window_seconds:g}s")
        if self.type == FLAPPING:
            return f">= {self.threshold} x {self.from_phase} -> {self.to_phase} in {self.window_seconds:g}s"
        if self.type == METRICS:
            sign = ">" if self.direction == "above" else "<"
            return (f"{self.consecutive} consecutive evaluations of {self.query.strip()} {sign} {self.critical:g} "
                    f"(critical; warning {sign} {self.warning:g}), one at most every {self.every_seconds:g}s")
        return f"{self.phase} for more than {self.seconds:g}s"


def promql_string(value: str) -> str:
    """`value` as a PromQL double-quoted string literal (backslash, quote and line breaks escaped)."""
    escaped = (str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r"))
    return f'"{escaped}"'


def promql_matchers(selector: Mapping[str, str] | None, *extra: str) -> str:
    """`{a="x",b="y",<extra>}`: equality matchers for `selector` (label names checked, values escaped), then
    `extra` matchers as given ('' when there are none)."""
    parts = []
    for label, value in sorted((selector or {}).items()):
        if not LABEL_NAME.match(label):
            raise RuleError(f"selector.{label}: not a Prometheus label name")
        parts.append(f"{label}={promql_string(value)}")
    parts.extend(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _window(seconds: float) -> str:
    if not seconds > 0 or not math.isfinite(seconds):
        raise RuleError(f"window_seconds: must be > 0 (got {seconds!r})")
    return f"{max(1, round(seconds))}s"


def latency_p99_rule(name: str = "latency_p99", *, warning: float = 0.5, critical: float = 1.0,
                     window_seconds: float = 300, selector: Mapping[str, str] | None = None,
                     service_label: str = "service", namespace_label: str = "namespace", consecutive: int = 3,
                     every_seconds: float = 30.0, rollback: bool = True) -> AnomalyRule:
    """The P99 latency of the kind's Service, in seconds, from the standard histogram
    `http_request_duration_seconds_bucket` over `window_seconds`, one series per Service: the object is the one
    whose namespace is `namespace_label` and whose name is `service_label` (the kind's Service is named after
    its object). `selector`: more equality matchers (e.g. `{"job": "memcached"}`), escaped."""
    for label in (service_label, namespace_label):
        if not LABEL_NAME.match(label):
            raise RuleError(f"{name}.labels: {label!r} is not a Prometheus label name")
    by = f"{namespace_label}, {service_label}, le"
    query = (f"histogram_quantile(0.99, sum by ({by}) (rate(http_request_duration_seconds_bucket"
             f"{promql_matchers(selector)}[{_window(window_seconds)}])))")
    return AnomalyRule(name, METRICS, query=query, warning=warning, critical=critical, consecutive=consecutive,
                       every_seconds=every_seconds, rollback=rollback,
                       labels={"namespace": namespace_label, "name": service_label})


def error_ratio_rule(name: str = "http_5xx", *, warning: float = 0.01, critical: float = 0.05,
                     window_seconds: float = 300, selector: Mapping[str, str] | None = None,
                     service_label: str = "service", namespace_label: str = "namespace", consecutive: int = 3,
                     every_seconds: float = 30.0, rollback: bool = True) -> AnomalyRule:
    """The share of the kind's Service's HTTP answers that were 5xx over `window_seconds` (0.05: 5 %), from the
    standard counter `http_requests_total` (`code=~"5.."` over all codes), one series per Service (bound like
    `latency_p99_rule`). A Service that answered nothing has no ratio: not evaluated, never healthy."""
    for label in (service_label, namespace_label):
        if not LABEL_NAME.match(label):
            raise RuleError(f"{name}.labels: {label!r} is not a Prometheus label name")
    by = f"{namespace_label}, {service_label}"
    window = _window(window_seconds)
    five_xx = 'code=~"5.."'
    errors = f"rate(http_requests_total{promql_matchers(selector, five_xx)}[{window}])"
    total = f"rate(http_requests_total{promql_matchers(selector)}[{window}])"
    query = f"sum by ({by}) ({errors}) / sum by ({by}) ({total})"
    return AnomalyRule(name, METRICS, query=query, warning=warning, critical=critical, consecutive=consecutive,
                       every_seconds=every_seconds, rollback=rollback,
                       labels={"namespace": namespace_label, "name": service_label})


#: the defaults when neither the kind nor OPSCONSOLE_ANOMALY_RULES says otherwise
DEFAULT_RULES: tuple[AnomalyRule, ...] = (
    AnomalyRule("backoff", EVENTS, window_seconds=300, threshold=3, reasons=("BackOff", "Failed", "Unhealthy"),
                types=("Warning",), involved="children"),
    AnomalyRule("flapping", FLAPPING, window_seconds=600, threshold=4, from_phase="Running", to_phase="Degraded"),
    AnomalyRule("stuck", STUCK, phase="Pending", seconds=900, rollback=False),
)


@dataclass(frozen=True)
class Healing:
    """A kind's healing: its anomaly rules (None: the settings' defaults) and automatic rollback (off unless the
    kind, the settings or the object's `opsconsole.io/auto-rollback` annotation turns it on).

    With automatic rollback, a spec change that leads to the failed phase, to an anomaly (of a rule with
    `rollback`), or to no ready phase within `rollback_after_seconds` is rolled back to the last generation that
    reached a ready phase; the restored generation must reach one within `verify_seconds`, else the engine
    escalates."""

    rules: tuple[AnomalyRule, ...] | None = None
    auto_rollback: bool = False
    rollback_after_seconds: float = 300.0
    verify_seconds: float = 300.0

    def with_settings(self, overrides: Mapping[str, Any] | None, default_rules: Sequence[AnomalyRule]) -> Healing:
        """This healing with a kind's `OPSCONSOLE_HEALING` entry applied and the rules resolved."""
        healing = self
        if overrides:
            values = dict(overrides)
            unknown = sorted(set(values) - {"rules", "auto_rollback", "rollback_after_seconds", "verify_seconds"})
            if unknown:
                raise RuleError(f"OPSCONSOLE_HEALING.{unknown[0]}: unknown setting")
            if "rules" in values:
                values["rules"] = tuple(AnomalyRule.from_dict(r) if isinstance(r, Mapping) else r
                                        for r in values["rules"])
            healing = replace(healing, **values)
        if healing.rules is None:
            healing = replace(healing, rules=tuple(default_rules))
        return healing
