"""Defaults and validation of `admissionregistration.k8s.io/v1` Mutating/ValidatingWebhookConfigurations, as
kube-apiserver applies them: each webhook needs a qualified unique name, `admissionReviewVersions` with `v1`,
`sideEffects` of `None` or `NoneOnDryRun`, exactly one of `clientConfig.url` (https) and `clientConfig.service`;
`failurePolicy` (Fail), `matchPolicy` (Equivalent), `timeoutSeconds` (10, from 1 to 30), `namespaceSelector` and
`objectSelector` ({}), rule `scope` (*) and, for mutating webhooks, `reinvocationPolicy` (Never) are defaulted."""

from __future__ import annotations

from typing import Any

from kubesim.cluster.podspec import Causes
from kubesim.errors import cause

_OPERATIONS = {"*", "CREATE", "UPDATE", "DELETE", "CONNECT"}


def default_webhooks(obj: dict[str, Any], mutating: bool) -> None:
    """Fill in the defaults of every webhook (in place)."""
    for hook in obj.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("timeoutSeconds", 10)
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def validate_webhooks(obj: dict[str, Any], mutating: bool) -> Causes:
    """The causes of an invalid configuration ([] when valid)."""
    causes: Causes = []
    seen: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        at = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            causes.append(cause(at, "FieldValueInvalid", "Invalid value: must be an object"))
            continue
        name = str(hook.get("name") or "")
        if name.count(".") < 2:
            causes.append(cause(f"{at}.name", "FieldValueInvalid", f'Invalid value: "{name}": should be a domain '
                                "with at least three segments separated by dots"))
        elif name in seen:
            causes.append(cause(f"{at}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        seen.add(name)
        if "v1" not in (hook.get("admissionReviewVersions") or []):
            causes.append(cause(f"{at}.admissionReviewVersions", "FieldValueRequired",
                                "Required value: must specify one of v1, v1beta1"))
        if hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            causes.append(cause(f"{at}.sideEffects", "FieldValueNotSupported",
                                f'Unsupported value: "{hook.get("sideEffects") or ""}": supported values: "None", '
                                '"NoneOnDryRun"'))
        config = hook.get("clientConfig") or {}
        if bool(config.get("url")) == bool(config.get("service")):
            causes.append(cause(f"{at}.clientConfig", "FieldValueRequired",
                                "Required value: exactly one of url or service is required"))
        elif config.get("url") and not str(config["url"]).startswith("https://"):
            causes.append(cause(f"{at}.clientConfig.url", "FieldValueInvalid",
                                f'Invalid value: "{config["url"]}": \'https\' is the only allowed URL scheme'))
        if hook.get("failurePolicy") not in ("Fail", "Ignore"):
            causes.append(cause(f"{at}.failurePolicy", "FieldValueNotSupported", "Unsupported value"))
        timeout = hook.get("timeoutSeconds")
        if not isinstance(timeout, int) or not 1 <= timeout <= 30:
            causes.append(cause(f"{at}.timeoutSeconds", "FieldValueInvalid",
                                f"Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds"))
        if mutating and hook.get("reinvocationPolicy") not in ("Never", "IfNeeded"):
            causes.append(cause(f"{at}.reinvocationPolicy", "FieldValueNotSupported", "Unsupported value"))
        for j, rule in enumerate(hook.get("rules") or []):
            ops = set((rule or {}).get("operations") or [])
            if not ops or not ops <= _OPERATIONS:
                causes.append(cause(f"{at}.rules[{j}].operations", "FieldValueNotSupported",
                                    f"Unsupported value: {sorted(ops)}"))
            if not (rule or {}).get("resources"):
                causes.append(cause(f"{at}.rules[{j}].resources", "FieldValueRequired", "Required value"))
    return causes


def check_mutating(obj: dict[str, Any]) -> Causes:
    """A MutatingWebhookConfiguration about to be stored: defaulted, then validated."""
    default_webhooks(obj, True)
    return validate_webhooks(obj, True)


def check_validating(obj: dict[str, Any]) -> Causes:
    """A ValidatingWebhookConfiguration about to be stored: defaulted, then validated."""
    default_webhooks(obj, False)
    return validate_webhooks(obj, False)
