"""Wait until the web server answers, print where to open it and how to log in, then stay idle.

It is one of `make run`'s processes, so it stays alive until Ctrl-C (honcho stops all when one exits).
"""

import signal
import sys
import time
import urllib.error
import urllib.request


def wait_for(url: str, timeout: float = 120.0) -> bool:
    """Poll url until it answers (any HTTP status) or timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "healthz", timeout=2)
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            time.sleep(0.3)
    return False


def main() -> None:
    """Announce the console's URL and the demo login once the web process is up."""
    url, login = sys.argv[1], sys.argv[2]
    if wait_for(url):
        bar = "=" * 72
        print(f"{bar}\n  opsconsole is up: open {url}\n  {login}\n  Ctrl-C stops everything.\n{bar}", flush=True)
    else:
        print(f"the web server did not answer at {url} within 120 s", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
