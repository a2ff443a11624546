"""Rendering a planned kind: every file of its package as text, from the templates in `templates/` (package data:
real files, so a test renders them and lints and type-checks the output).

Each template is a `string.Template` (`$name` placeholders, `$$` a literal dollar sign). `kind.py.tmpl` is the
kind's module, filled with the child manifests (`workload`, `service`, `simple`, `container`), the spec fields
(`workload_fields`, `deadline_field`, `port_field`), the status model and the body of `reconcile()`
(`reconcile_empty`, `reconcile_rollout`); `test.py.tmpl` (plus `broken_image_tests` for a Deployment) is the
kind's test module. The phase names and the state machine are templates of their own (`phase_names`, `machine`);
a kind whose only workload is a StatefulSet gets the ordered upgrade's instead (`scaffold.stateful`).
"""

from __future__ import annotations

import json
import textwrap
from functools import cache
from importlib.resources import files
from string import Template

import yaml

from reconcilers.authoring.scaffold import stateful
from reconcilers.authoring.scaffold.names import BUILTIN, DEFAULT_IMAGE, Scaffold, snake


@cache
def template(name: str) -> Template:
    """The template `templates/<name>.py.tmpl` of this package."""
    return Template(files(__package__).joinpath("templates", f"{name}.py.tmpl").read_text(encoding="utf-8"))


def render(s: Scaffold) -> dict[str, str]:
    """Every file of the package by relative path."""
    lower = s.kind.lower()
    return {
        "__init__.py": f'"""The {s.kind} kind ({s.group}/{s.version}) for opsconsole: see kind.py."""\n',
        "kind.py": render_kind(s),
        f"samples/{lower}.yaml": render_sample(s),
        "tests/__init__.py": "",
        f"tests/test_{lower}.py": render_test(s),
    }


def sample_object(s: Scaffold) -> dict[str, object]:
    """The sample custom resource."""
    spec: dict[str, object] = {}
    if any(o.workload for o in s.owns):
        spec.update(image=DEFAULT_IMAGE, replicas=2)
    if _has_port(s):
        spec["port"] = 80
    spec["labels"] = {"team": "platform"}
    return {"apiVersion": f"{s.group}/{s.version}", "kind": s.kind, "metadata": {"name": f"{s.kind.lower()}-sample"},
            "spec": spec}


def render_sample(s: Scaffold) -> str:
    """The sample as YAML, with a comment saying how to apply it."""
    head = (f"# A sample {s.kind}: kubectl --kubeconfig data/kubeconfig apply -f "
            f"{s.package}/samples/{s.kind.lower()}.yaml\n")
    return head + yaml.safe_dump(sample_object(s), sort_keys=False, default_flow_style=False)


def _has_port(s: Scaffold) -> bool:
    return any(o.workload or (o.group, o.kind) == ("", "Service") for o in s.owns)


_SIMPLE_BODIES = {
    ("", "ConfigMap"): '\n        "data": {},  # your configuration here (file name → content)',
    ("", "Secret"): '\n        "type": "Opaque",\n        "data": {},  # your keys here (values base64-encoded)',
    ("", "ServiceAccount"): "",
    ("", "Namespace"): "",
}


def _child_functions(s: Scaffold) -> str:
    out = []
    if any(o.workload for o in s.owns):
        out.append(template("container").substitute(kind=s.kind, lower=s.kind.lower()))
    for o in s.owns:
        special = stateful.child_function(s, o, template) if stateful.ordered(s) else None
        if special is not None:
            out.append(special)
        elif o.workload:
            service_name = '\n            "serviceName": short_name(meta["name"]),' if o.kind == "StatefulSet" else ""
            deadline = ('\n            "progressDeadlineSeconds": spec.progress_deadline_seconds,'
                        if o.kind == "Deployment" else "")
            out.append(template("workload").substitute(kind=s.kind, name=o.name, child=o.kind,
                                                       api_version=o.api_version, service_name=service_name,
                                                       deadline=deadline))
        elif (o.group, o.kind) == ("", "Service"):
            target = '"http"' if any(c.workload for c in s.owns) else "spec.port"
            out.append(template("service").substitute(kind=s.kind, target_port=target))
        else:
            body = _SIMPLE_BODIES.get((o.group, o.kind), f"\n        # the rest of the {o.kind} here (its spec)")
            out.append(template("simple").substitute(kind=s.kind, name=o.name, child=o.kind,
                                                     api_version=o.api_version, body=body))
    return "".join(out)


def _reconcile_body(s: Scaffold) -> str:
    if not s.owns:
        return template("reconcile_empty").substitute(kind=s.kind)
    if stateful.ordered(s):
        return stateful.reconcile_body(s, template)
    workloads = [o for o in s.owns if o.workload]
    lines = [f'        """Apply the children, then derive the phase from {_readiness_subject(s)}."""',
             f"        spec: {s.kind}Spec = ctx.spec"]
    for o in s.owns:
        call = f"ctx.apply_child({o.name}_manifest(obj, spec))"
        lines.append(f"        {o.name} = {call}" if o.workload else f"        {call}")
    if not workloads:
        names = " and ".join(f"{o.kind}" for o in s.owns)
        lines += [
            "        # your readiness checks here: apply_child returns each child as the API has it, with its status",
            f'        return Result(RUNNING, "Ready", "{names} applied")',
        ]
        return "\n".join(lines) + "\n"
    judged = (f"rollout_status({workloads[0].name})" if len(workloads) == 1
              else f"worst([{', '.join(f'rollout_status({o.name})' for o in workloads)}])")
    lines.append(template("reconcile_rollout").substitute(judged=judged))
    return "\n".join(lines)


def _readiness_subject(s: Scaffold) -> str:
    workloads = [o.kind for o in s.owns if o.workload]
    if not workloads:
        return "them"
    return "the rollout of the " + " and the ".join(workloads)


def render_kind(s: Scaffold) -> str:
    """kind.py: the spec model, the state machine, the child manifests and the reconciler."""
    lower = s.kind.lower()
    workloads = [o for o in s.owns if o.workload]
    const = snake(s.kind).upper()
    resources = [f'{const} = ResourceKind("{s.group}", "{s.version}", "{s.plural}", "{s.kind}", '
                 f"namespaced={s.namespaced})"]
    for o in s.owns:
        if (o.group, o.kind) not in BUILTIN:
            resources.append(f"# {o.kind}: check the plural and the scope (namespaced or not)")
        resources.append(f'{o.const} = ResourceKind("{o.group}", "{o.version}", "{o.plural}", "{o.kind}", '
                         f"namespaced={o.namespaced})")
    children = " and ".join(f"a {o.kind}" for o in s.owns)
    if workloads:
        summary = (f"A {s.kind} runs spec.replicas pods of spec.image; it owns {children}, named after it.")
        phases = ("- Pending: the current spec is rolling out (a new object; every spec change goes back through "
                  "Pending);\n- Running: the rollout of the current spec is complete (every replica updated and "
                  "available:\n  reconcilers.core.rollout.rollout_status, kubectl rollout status' rules);\n"
                  "- Degraded: it was Running and the rollout is no longer complete (pods lost);")
        service = " behind a Service" if any((o.group, o.kind) == ("", "Service") for o in s.owns) else ""
        doc = f"Runs spec.replicas pods of spec.image in a {' and a '.join(o.kind for o in workloads)}{service}."
    elif s.owns:
        summary = f"A {s.kind} owns {children}, named after it."
        phases = ("- Pending: a new object, or a spec change being applied;\n- Running: its children are applied;\n"
                  "- Degraded: not used yet (for when a child stops being ready);")
        doc = f"Keeps {children} in line with the {s.kind}'s spec."
    else:
        summary = f"A {s.kind} does nothing yet but report Running: add your fields, children and logic."
        phases = ("- Pending: a new object, or a spec change being applied;\n- Running: reconciled;\n"
                  "- Degraded: not used yet (for when what it manages stops being ready);")
        doc = f"Reconciles a {s.kind} (describe what it does here: this is the CRD's description)."
    if s.namespaced:
        scope_note = ""
    else:
        scope_note = (f"\nA {s.kind} is cluster-scoped, so it owns only cluster-scoped kinds (`startkind` refuses "
                      "namespaced\n--owns kinds: their objects need a namespace). To manage objects inside a "
                      "namespace, add a field\nnaming it to the spec and put them there (see "
                      "reconcilers/kinds/tenant.py), or make the kind namespaced.\n")
    fields = ""
    if workloads:
        fields += template("workload_fields").substitute(default_image=DEFAULT_IMAGE)
    if any(o.kind == "Deployment" for o in workloads):
        fields += template("deadline_field").template
    if _has_port(s):
        service = any((o.group, o.kind) == ("", "Service") for o in s.owns)
        fields += template("port_field").substitute(and_service=" and the Service exposes" if service else "")
    if workloads:
        columns = ('        PrinterColumn("Ready", ".status.readyReplicas", type="integer", '
                   'description="Ready pods"),\n'
                   '        PrinterColumn("Replicas", ".spec.replicas", type="integer"),\n'
                   '        PrinterColumn("Image", ".spec.image", priority=1),\n')
    else:
        columns = "        PrinterColumn(\"Ready\", '.status.conditions[?(@.type==\"Ready\")].status'),\n"
    summary = textwrap.fill(summary + " Its phase says where it stands:", width=112)
    parts = {"phase_names": template("phase_names").template, "machine": template("machine").substitute(kind=s.kind),
             "time_import": "", "core_import": ""}
    if stateful.ordered(s):  # a StatefulSet upgraded one ordinal at a time within its budget and spread
        extra = stateful.kind_overrides(s, template)
        fields += extra.pop("extra_fields")
        resources.append(extra.pop("extra_resources"))
        phases = extra.pop("phases")
        parts.update(extra)
    values = dict(
        kind=s.kind, lower=lower, group=s.group, version=s.version, package=s.package, const=const,
        startkind="opsconsole startkind --project" if s.project else "manage.py startkind",
        crds_command=crds_command(s),
        scope="namespaced" if s.namespaced else "cluster-scoped", summary=summary, phases=phases,
        scope_note=scope_note, resources="\n".join(resources), fields=fields,
        labels_target="the objects it creates" if s.owns else "what it creates (your children)",
        status_model=template("status_model").substitute(kind=s.kind) if workloads else "\n",
        in_namespace=", in its namespace" if s.namespaced else "",
        namespace_field=' "namespace": obj["metadata"]["namespace"],' if s.namespaced else "",
        manifests=_child_functions(s), doc=doc,
        status_decl=f"    status_model = {s.kind}Status\n" if workloads else "",
        owns_tuple="".join(f"{o.const}, " for o in s.owns).rstrip(" ") if len(s.owns) == 1
        else ", ".join(o.const for o in s.owns),
        short=_short_name(s.kind), columns=columns,
        poll=("    #: how often a rollout in progress is looked at without an event from a child\n"
              "    poll_seconds = 10.0\n") if workloads else "",
        reconcile=_reconcile_body(s),
        failed=("the Deployment's rollout failed (no progress for spec.progressDeadlineSeconds; automatic\n"
                "  rollback acts on it), or\n  " if any(o.kind == "Deployment" for o in workloads) else ""),
        rollout_import=("from reconcilers.core.rollout import rollout_status\n" if len(workloads) == 1
                        else "from reconcilers.core.rollout import rollout_status, worst\n" if workloads else ""),
    )
    return template("kind").substitute({**values, **parts})


def crds_command(s: Scaffold) -> str:
    """The command that prints the kind's CRD: in its own repository the installed `opsconsole` command finds the
    kind through the project's entry point; in a checkout, `manage.py` is told the reconciler's path."""
    if s.project:
        return f"opsconsole crds {s.kind}"
    return f"OPSCONSOLE_RECONCILERS={s.reconciler_path} python manage.py crds {s.kind}"


def _short_name(kind: str) -> str:
    caps = "".join(c for c in kind if c.isupper()).lower()
    return caps if len(caps) >= 2 else kind[:2].lower()


def render_test(s: Scaffold) -> str:
    """tests/test_<kind>.py: the sample reaches Running, an invalid spec is Failed (and, for a Deployment, a
    broken image is not reported ready and is rolled back)."""
    kinds = sorted(o.kind for o in s.owns)
    asserts = f"    assert sorted(c[\"kind\"] for c in outcome.children) == {json.dumps(kinds)}\n"
    if len(asserts) > 110:
        items = textwrap.fill(", ".join(json.dumps(k) for k in kinds), width=100, initial_indent=" " * 8,
                              subsequent_indent=" " * 8)
        asserts = f"    assert sorted(c[\"kind\"] for c in outcome.children) == [\n{items},\n    ]\n"
    for o in s.owns:
        if o.workload:
            asserts += (f'    {o.name} = next(c for c in outcome.children if c["kind"] == "{o.kind}")\n'
                        f'    assert {o.name}["spec"]["replicas"] == sample()["spec"]["replicas"]\n')
    if any(o.workload for o in s.owns):
        asserts += '    assert outcome.status["readyReplicas"] == sample()["spec"]["replicas"]\n'
    text = template("test").substitute(kind=s.kind, lower=s.kind.lower(), package=s.package, children_asserts=asserts)
    if any(o.kind == "Deployment" for o in s.owns):
        # a StatefulSet has no progress deadline, and Kubernetes does not replace its broken pod after a
        # rollback by itself (a known StatefulSet limitation): these tests are for Deployments
        text = text.replace("import yaml\n", "import yaml\nfrom kubernetes import client\n", 1)
        text += template("broken_image_tests").substitute(image=DEFAULT_IMAGE, lower=s.kind.lower(), group=s.group,
                                               version=s.version, plural=s.plural)
    return text
