"""The health tree in Debian's Chromium (Playwright) against a live server on kubesim, without the engine: a
Memcached whose Deployment (created here, owned by it) runs `memcached:broken` shows its Pod in the tree with the
waiting reason (ErrImagePull or ImagePullBackOff, as kubesim's kubelet cycles them); the Pod's link opens its
object page with its YAML. At 1280 px, no JavaScript console errors."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from reconcilers.engine import kube
from reconcilers.kinds.memcached import DEPLOYMENT, MEMCACHED, POD
from reconcilers.services.selectors import health_tree
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
WAITING = re.compile("ImagePullBackOff|ErrImagePull")



def broken_memcached(kapi, namespace: str):
    """A Memcached in kubesim, its mirror row, and a Deployment it controls running a broken image; back once
    kubesim's kubelet reports the Pod's container waiting."""
    mc = kube.create_object(kapi, MEMCACHED, {"apiVersion": MEMCACHED.api_version, "kind": "Memcached",
                                              "metadata": {"name": "cache", "namespace": namespace},
                                              "spec": {"size": 1, "image": "memcached:broken"}}, namespace)
    res = f.resource("cache", namespace, uid=mc["metadata"]["uid"], spec=mc["spec"])
    labels = {"app": "cache"}
    kube.create_object(kapi, DEPLOYMENT, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "cache", "namespace": namespace, "ownerReferences": [{
            "apiVersion": MEMCACHED.api_version, "kind": "Memcached", "name": "cache", "uid": mc["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "memcached", "image": "memcached:broken"}]}}}}, namespace)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pods = kube.list_objects(kapi, POD, namespace).items
        if any(WAITING.search(str(p.get("status"))) for p in pods):
            return res, pods[0]["metadata"]["name"]
        time.sleep(0.1)
    raise AssertionError(f"no Pod waiting on its image: {pods}")


def test_a_broken_child_shows_the_pods_waiting_reason_and_links_to_its_page(
        chromium, live_server, kapi, namespace, queue, builtin_kinds_only):
    res, pod_name = broken_memcached(kapi, namespace)
    health_tree.cache_clear()
    user = f.user("tree-viewer", "viewer", [namespace])
    context, page, errors = signed_in(chromium, live_server.url, user, width=1280, height=900)
    try:
        page.goto(f"{live_server.url}/resources/{res.pk}/")
        row = page.locator(f'#health-tree tr[data-kind="Pod"][data-name="{pod_name}"]')
        expect(row).to_contain_text(WAITING)
        expect(row).to_contain_text("Failed")  # the badge says it in words, not only in colour
        expect(page.locator('#health-tree tr[data-kind="Deployment"]')).to_contain_text("0/1 ready")
        expect(page.locator('#health-tree tr[data-kind="ReplicaSet"]')).to_have_count(1)
        link = row.locator("a")
        link.focus()
        expect(link).to_be_focused()
        link.press("Enter")
        page.wait_for_url(re.compile(rf"/objects/core/v1/pods/{namespace}/{pod_name}/$"))
        expect(page.locator("#object-yaml")).to_contain_text("image: memcached:broken")
        expect(page.locator("#owners")).to_contain_text("ReplicaSet")
        expect(page.locator(f'#owners a[href="/resources/{res.pk}/"]')).to_have_count(1)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        assert errors == []
    finally:
        context.close()
