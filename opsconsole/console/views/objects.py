"""A read-only page for one Kubernetes object below a registered resource (a Deployment, a ReplicaSet, a Pod, a
Service…): its YAML (managedFields omitted), its Events (a live LIST by involvedObject.uid, plus the archived
ones when it belongs to a mirrored resource) and its owner chain up to that resource, with links.

Why only some kinds: the console reads with its own identity, which may read more than its users should see (the
engine's ClusterRole covers Pods, ReplicaSets, Events and every owned kind, and a future grant might cover
Secrets). So the page shows only what the health tree can lead to: a registered kind's `owns`, ReplicaSets,
Pods and Events (`generic_objects.viewable_kinds`), and of those only an object in the owner chain of a mirrored
resource the user may read (an Event: the object it is about); any other address or object (another kind, a
Secret no registered resource owns) is a 404, as is an object outside the user's namespaces (the same login,
role and namespace limit as the resource pages; a cluster-scoped object needs the cluster scope ''). A Secret a
registered kind owns is shown as `kubectl describe` shows it: its keys and their sizes, never a value.

`?cluster=NAME` reads the object in that registered cluster (through its API client; none: the default cluster),
and shows it only when its owner chain reaches a resource mirrored from that cluster; the links it gives keep
the cluster."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse

from opsconsole.accounts.roles import user_namespaces
from opsconsole.console.clusters import cluster_choice
from opsconsole.console.live import page
from opsconsole.console.security import console_page
from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine import apiclient
from reconcilers.services.selectors import generic_objects
from reconcilers.services.selectors.scope import scope_allows

NOT_FOUND = "No such object, or it is outside your namespaces or not shown by the console."


@console_page
def object_detail(request: HttpRequest, group: str, version: str, plural: str, name: str,
                  namespace: str = "") -> HttpResponse:
    """One object (namespaced when `namespace` is given, cluster-scoped otherwise)."""
    kind = generic_objects.viewable_kind(group, version, plural)
    if kind is None or kind.namespaced != bool(namespace):
        raise Http404(NOT_FOUND)
    limit = user_namespaces(request.user)
    cluster = request.GET.get("cluster", "") or DEFAULT_CLUSTER
    if cluster not in {c.name for c in cluster_choice(request).clusters} or not scope_allows(limit, cluster,
                                                                                             namespace):
        raise Http404(NOT_FOUND)
    try:
        api = None if cluster == DEFAULT_CLUSTER else apiclient.get_api_client(cluster)
        view = generic_objects.object_page(kind, namespace, name, namespaces=limit, api=api)
        if view.resource is not None and view.resource.cluster != cluster:
            raise generic_objects.ObjectMissing(name)
    except generic_objects.ObjectMissing as exc:
        raise Http404(NOT_FOUND) from exc
    except Exception as exc:  # the Kubernetes API did not answer: say so, never a 500
        return page(request, "console/object.html",
                    {"kind": kind, "namespace": namespace, "name": name, "view": None, "cluster": cluster,
                     "error": f"The Kubernetes API did not answer: {exc}"}, status=503)
    return page(request, "console/object.html",
                {"kind": kind, "namespace": namespace, "name": name, "view": view, "error": view.error,
                 "cluster": cluster, "in_cluster": "" if cluster == DEFAULT_CLUSTER else f"?cluster={cluster}"})
