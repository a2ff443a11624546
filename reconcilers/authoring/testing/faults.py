"""kubesim's failures, set for one test (the `kubesim_faults` fixture): images that never pull or that crash-loop,
and API errors, all back to the session's defaults when the test ends.

kubesim's simulated kubelet judges an image by its tag: a tag containing a *broken* marker (by default
`broken`, `imagepullbackoff`, `doesnotexist`) never pulls (ErrImagePull, then ImagePullBackOff), a tag
containing a *crash* marker (by default `crashloop`, `crash`) starts and then restarts into CrashLoopBackOff; any
other image runs (`nginx:does-not-exist` runs: its tag has a dash). `fail_image_pull("web:2.0-rc1")` makes every
tag containing `2.0-rc1` one that never pulls, for this test only. No Django here.
"""

from __future__ import annotations

from typing import Any

from kubesim.testing import KubesimHandle


def tag_of(image: str) -> str:
    """The part of `image` kubesim matches markers against: its tag, lower-case (`repo/name:tag` → `tag`); a
    string with no `:` after its last `/` is taken as the marker itself."""
    last = image.strip().rsplit("/", 1)[-1]
    marker = last.split(":", 1)[1] if ":" in last else last
    if not marker:
        raise ValueError(f"image {image!r} names no tag to mark (e.g. 'web:2.0-rc1' or '2.0-rc1')")
    return marker.lower()


class KubesimFaults:
    """One test's changes to the session's kubesim; `restore()` (the fixture calls it) puts the markers and the
    API faults back as they were."""

    def __init__(self, handle: KubesimHandle) -> None:
        self.handle = handle
        self._markers = handle.image_markers()
        self._api_faults = False

    def fail_image_pull(self, image: str) -> str:
        """Images whose tag contains `image`'s tag never pull (ErrImagePull / ImagePullBackOff); the marker."""
        marker = tag_of(image)
        current = self.handle.image_markers()
        self.handle.set_image_markers(broken=[*current["broken"], marker])
        return marker

    def crash_loop(self, image: str) -> str:
        """Images whose tag contains `image`'s tag start, then crash-loop (CrashLoopBackOff); the marker."""
        marker = tag_of(image)
        current = self.handle.image_markers()
        self.handle.set_image_markers(crash=[*current["crash"], marker])
        return marker

    def api_errors(self, **faults: Any) -> dict[str, Any]:
        """API faults for this test (`KubesimHandle.set_faults`: error_rate, error_code, retry_after, latency,
        latency_rate, watch_cut_after, watch_cut_interval, methods); the settings now in force."""
        self._api_faults = True
        return self.handle.set_faults(**faults)

    def restore(self) -> None:
        """The markers the test started with; no API faults."""
        self.handle.set_image_markers(broken=self._markers["broken"], crash=self._markers["crash"])
        if self._api_faults:
            self.handle.clear_faults()
            self._api_faults = False
