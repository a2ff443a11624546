"""The apiserver's rules for batch/v1 Jobs and CronJobs and policy/v1 PodDisruptionBudgets.

As in Kubernetes: a Job gets its parallelism/completions/backoffLimit defaults and a generated selector on the
label ``batch.kubernetes.io/controller-uid`` (unless ``manualSelector``); its pod template must restart
``OnFailure`` or ``Never`` and, with its selector and completions, cannot change. A CronJob's schedule is a
standard five-field cron line or a ``@descriptor`` (robfig/cron's ParseStandard), its timeZone a tz database
name. A PodDisruptionBudget sets minAvailable or maxUnavailable (not both), each an integer or a percentage.
No Job or CronJob controller runs (no Job is started); PDB status comes from controllers/disruption.py.
"""

from __future__ import annotations

import re
import zoneinfo
from functools import lru_cache
from typing import Any

from kubesim.cluster.podspec import Causes, default_pod_spec, validate_pod_spec
from kubesim.errors import cause
from kubesim.meta import new_uid

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
CRONJOB_NAME_MAX = 52  # the Job names the CronJob controller makes add an 11-character suffix
_RESTART_POLICIES = ("OnFailure", "Never")
_CONCURRENCY = ("Allow", "Forbid", "Replace")
_EVICTION_POLICIES = ("IfHealthyBudget", "AlwaysAllow")
_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_EVERY = re.compile(r"^@every (\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_MONTHS = {m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
#: (name, lowest, highest, names) of the five fields
_FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}), ("month", 1, 12, _MONTHS),
           ("day of week", 0, 6, _DAYS))
_PERCENT = re.compile(r"^(\d+)%$")


# ---- cron schedules -------------------------------------------------------------------------------------

def _cron_value(text: str, low: int, high: int, names: dict[str, int]) -> int:
    value = names.get(text.lower())
    if value is None:
        if not text.isdigit():
            raise ValueError(f"failed to parse int from {text}")
        value = int(text)
    if not low <= value <= high:
        raise ValueError(f"end of range ({value}) above maximum ({high}): {text}" if value > high else
                         f"beginning of range ({value}) below minimum ({low}): {text}")
    return value


def _cron_field(text: str, low: int, high: int, names: dict[str, int]) -> None:
    for part in text.split(","):
        span, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            raise ValueError(f"step of range should be a positive number: {part}")
        if span in ("*", "?"):
            continue
        first, dash, last = span.partition("-")
        start = _cron_value(first, low, high, names)
        if dash and _cron_value(last, low, high, names) < start:
            raise ValueError(f"beginning of range ({start}) beyond end of range ({last}): {part}")


def cron_schedule_error(schedule: str) -> str | None:
    """Why ``schedule`` is not a schedule the CronJob controller can parse, or None when it is."""
    if schedule.startswith(("TZ=", "CRON_TZ=")):
        return "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    if schedule.startswith("@"):
        if schedule in _DESCRIPTORS or _EVERY.match(schedule):
            return None
        return f"unrecognized descriptor: {schedule}"
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    try:
        for text, (_, low, high, names) in zip(fields, _FIELDS, strict=True):
            _cron_field(text, low, high, names)
    except ValueError as e:
        return str(e)
    return None


@lru_cache(maxsize=256)
def _time_zone_known(name: str) -> bool:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


# ---- shared checks --------------------------------------------------------------------------------------

def _non_negative(spec: dict[str, Any], path: str, *names: str, positive: tuple[str, ...] = ()) -> Causes:
    causes: Causes = []
    for name in (*names, *positive):
        value = spec.get(name)
        if value is None:
            continue
        floor = 1 if name in positive else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < floor:
            word = "greater than 0" if floor else "greater than or equal to 0"
            causes.append(cause(f"{path}.{name}", "FieldValueInvalid", f"Invalid value: {value}: must be {word}"))
    return causes


def _job_spec_causes(spec: Any, path: str) -> Causes:
    if not isinstance(spec, dict):
        return [cause(path, "FieldValueRequired", "Required value")]
    causes = _non_negative(spec, path, "parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished",
                           positive=("activeDeadlineSeconds",))
    template = spec.get("template")
    if not isinstance(template, dict):
        return [*causes, cause(f"{path}.template", "FieldValueRequired", "Required value")]
    pod = template.get("spec")
    causes += validate_pod_spec(pod, f"{path}.template.spec")
    policy = pod.get("restartPolicy") if isinstance(pod, dict) else None
    if policy not in _RESTART_POLICIES:
        causes.append(cause(f"{path}.template.spec.restartPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"'))
    return causes


# ---- Job ------------------------------------------------------------------------------------------------

def job_create(obj: dict[str, Any]) -> None:
    """SetDefaults_Job, and the generated selector (which needs the uid: assigned here, kept by the caller)."""
    spec = obj.setdefault("spec", {})
    if spec.get("parallelism") is None and spec.get("completions") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        if isinstance(template.setdefault("spec", {}), dict):
            default_pod_spec(template["spec"], template=True)
        meta = template.setdefault("metadata", {})
        meta.setdefault("creationTimestamp", None)
        if not spec.get("manualSelector"):
            uid = obj["metadata"].setdefault("uid", new_uid())
            name = obj["metadata"].get("name", "")
            labels = meta.setdefault("labels", {})
            labels.update({CONTROLLER_UID: uid, JOB_NAME: name, "controller-uid": uid, "job-name": name})
            spec["selector"] = {"matchLabels": {CONTROLLER_UID: uid}}
    obj["status"] = {}


def job_validate(obj: dict[str, Any]) -> Causes:
    """The Job spec's rules; a manual selector must select the template's labels."""
    from kubesim.selectors import selector_from_label_selector

    spec = obj.get("spec") or {}
    causes = _job_spec_causes(spec, "spec")
    selector = spec.get("selector")
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not selector:
        causes.append(cause("spec.selector", "FieldValueRequired", "Required value"))
    elif not selector_from_label_selector(selector)({"metadata": {"labels": labels}}):
        causes.append(cause("spec.template.metadata.labels", "FieldValueInvalid",
                            f"Invalid value: map[string]string{labels}: `selector` does not match template `labels`"))
    return causes


def job_update(new: dict[str, Any], old: dict[str, Any]) -> Causes:
    """Template, selector and completions of a Job are immutable (the defaults of the old spec fill gaps)."""
    spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
    for key, value in old_spec.items():
        if key in ("parallelism", "backoffLimit", "completionMode", "suspend", "podReplacementPolicy", "selector"):
            spec.setdefault(key, value)
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"], template=True)
        template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    causes: Causes = []
    for key in ("selector", "template", "completions", "completionMode"):
        if spec.get(key) != old_spec.get(key):
            causes.append(cause(f"spec.{key}", "FieldValueInvalid",
                                f"Invalid value: {spec.get(key)}: field is immutable"))
    return causes


# ---- CronJob --------------------------------------------------------------------------------------------

def _cronjob_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_template = spec.get("jobTemplate")
    if isinstance(job_template, dict):
        job_template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
        template = (job_template.get("spec") or {}).get("template")
        if isinstance(template, dict):
            template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
            if isinstance(template.setdefault("spec", {}), dict):
                default_pod_spec(template["spec"], template=True)


def cronjob_create(obj: dict[str, Any]) -> None:
    """SetDefaults_CronJob; status starts empty."""
    _cronjob_defaults(obj)
    obj["status"] = {}


def cronjob_update(new: dict[str, Any], old: dict[str, Any]) -> Causes:
    """Every field of a CronJob may change; the defaults apply again."""
    _cronjob_defaults(new)
    return []


def cronjob_validate(obj: dict[str, Any]) -> Causes:
    """Name length, schedule, timeZone, concurrencyPolicy, limits and the job template's spec."""
    spec = obj.get("spec") or {}
    causes: Causes = []
    name = obj["metadata"].get("name", "")
    if len(name) > CRONJOB_NAME_MAX:
        causes.append(cause("metadata.name", "FieldValueInvalid",
                            f'Invalid value: "{name}": must be no more than {CRONJOB_NAME_MAX} characters'))
    schedule = spec.get("schedule")
    if not schedule or not isinstance(schedule, str):
        causes.append(cause("spec.schedule", "FieldValueRequired", "Required value"))
    elif (why := cron_schedule_error(schedule)) is not None:
        causes.append(cause("spec.schedule", "FieldValueInvalid", f'Invalid value: "{schedule}": {why}'))
    tz = spec.get("timeZone")
    if tz is not None and (not isinstance(tz, str) or not tz or tz.lower() == "local" or not _time_zone_known(tz)):
        causes.append(cause("spec.timeZone", "FieldValueInvalid", f'Invalid value: "{tz}": unknown time zone {tz}'))
    if spec.get("concurrencyPolicy") not in _CONCURRENCY:
        causes.append(cause("spec.concurrencyPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{spec.get("concurrencyPolicy")}": supported values: "Allow", '
                            '"Forbid", "Replace"'))
    causes += _non_negative(spec, "spec", "startingDeadlineSeconds", "successfulJobsHistoryLimit",
                            "failedJobsHistoryLimit")
    job_template = spec.get("jobTemplate")
    if not isinstance(job_template, dict):
        causes.append(cause("spec.jobTemplate", "FieldValueRequired", "Required value"))
    else:
        causes += _job_spec_causes(job_template.get("spec"), "spec.jobTemplate.spec")
    return causes


# ---- PodDisruptionBudget --------------------------------------------------------------------------------

def pdb_create(obj: dict[str, Any]) -> None:
    """Status starts at zero counts, as the apiserver writes it."""
    obj.setdefault("spec", {})
    obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


def _int_or_percent_causes(value: Any, path: str) -> Causes:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return [cause(path, "FieldValueInvalid", f"Invalid value: {value!r}: must be an integer or percentage")]
    if isinstance(value, int):
        return [] if value >= 0 else [cause(path, "FieldValueInvalid",
                                            f"Invalid value: {value}: must be greater than or equal to 0")]
    m = _PERCENT.match(value)
    if not m:
        return [cause(path, "FieldValueInvalid", f'Invalid value: "{value}": a valid percent string must be a '
                      "numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation "
                      "is '[0-9]+%')")]
    if int(m.group(1)) > 100:
        return [cause(path, "FieldValueInvalid", f'Invalid value: "{value}": must not be greater than 100%')]
    return []


def pdb_validate(obj: dict[str, Any]) -> Causes:
    """minAvailable xor maxUnavailable, each a non-negative integer or a percentage up to 100%."""
    spec = obj.get("spec") or {}
    causes: Causes = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(cause("spec", "FieldValueInvalid",
                            "Invalid value: policy.PodDisruptionBudgetSpec: minAvailable and maxUnavailable cannot "
                            "be both set"))
    for key in ("minAvailable", "maxUnavailable"):
        if spec.get(key) is not None:
            causes += _int_or_percent_causes(spec[key], f"spec.{key}")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _EVICTION_POLICIES:
        causes.append(cause("spec.unhealthyPodEvictionPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{policy}": supported values: "AlwaysAllow", "IfHealthyBudget"'))
    return causes
