"""An informer whose watch connections kubesim drops mid-stream again and again (as a proxy or a restarting API
server does): each break is the end of that watch, not an error, so the informer resumes from the last
resourceVersion at once instead of backing off further with every break; it misses nothing and never
re-lists; the breaks count in opsconsole_informer_restarts_total{reason="broken"}."""

from __future__ import annotations

import time

from prometheus_client import REGISTRY

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.engine.controller.informer import Informer
from tests.reconcilers.engine.controller.kinds import WIDGET, widget
from tests.reconcilers.engine.controller.test_informer import Recorder

CUT_INTERVAL = 0.3


def restarts(informer: Informer, reason: str) -> float:
    return REGISTRY.get_sample_value("opsconsole_informer_restarts_total",
                                     {"resource": informer.resource, "reason": reason}) or 0.0


def test_watches_broken_mid_stream_resume_at_once_and_miss_nothing(api, widget_kind, ns, kubesim_faults):
    rec = Recorder()
    informer = Informer(api, WIDGET, rec, namespace=ns).start()
    try:
        assert informer.synced.wait(10)
        broken, errors = restarts(informer, "broken"), restarts(informer, "error")
        kubesim_faults.set_faults(watch_cut_interval=CUT_INTERVAL)
        for i in range(24):  # ~2.4 s of changes: about eight watches, each broken after it delivered some
            kube.create_object(api, WIDGET, widget(f"w{i}", ns))
            time.sleep(0.1)
        wait_for(lambda: rec.seen("ADDED", "w23"), timeout=10)
        cuts = kubesim_faults.stats()["watchesCut"]
    finally:
        kubesim_faults.clear_faults()
        informer.stop()
    added = [e[1] for e in rec.events if e[0] == "ADDED"]
    assert added == [f"w{i}" for i in range(24)]  # each once, in order
    assert informer.lists == 1  # resumed every time, never re-listed
    assert cuts >= 3 and restarts(informer, "broken") - broken >= 3
    assert restarts(informer, "error") == errors  # a break is not an error: nothing backed off for it
