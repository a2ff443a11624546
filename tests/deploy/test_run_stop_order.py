"""`make run` stops in order: the controller (and the worker, web, announcer) first, the cluster (kubesim) and
the embedded Redis only once those have exited, so the controller releases its leader Lease on a cluster that
still answers and the next start reconciles at once."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from scripts.run import stop_in_order

ROOT = Path(__file__).resolve().parents[2]


def test_the_last_processes_are_signalled_only_once_the_others_have_exited():
    sent: list[str] = []
    exits_at = {101: 0.3, 102: 0.6}  # controller, worker: still alive until then
    now = [0.0]

    order = stop_in_order({"kubesim": 100, "controller": 101, "worker": 102, "redis": 103},
                          lambda name, pid: sent.append(f"{name}@{now[0]:.2f}"),
                          alive=lambda pid: now[0] < exits_at.get(pid, 0.0), clock=lambda: now[0],
                          sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert order == ["controller", "worker", "kubesim", "redis"]
    assert sent[:2] == ["controller@0.00", "worker@0.00"]
    assert all(float(s.split("@")[1]) >= 0.6 for s in sent[2:])


def test_a_process_that_does_not_exit_delays_the_last_ones_by_the_grace_only():
    now = [0.0]
    sent: list[tuple[str, float]] = []
    stop_in_order({"controller": 1, "kubesim": 2}, lambda name, pid: sent.append((name, now[0])),
                  alive=lambda pid: True, grace=2.0, clock=lambda: now[0],
                  sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert sent[0] == ("controller", 0.0) and sent[1][0] == "kubesim" and 2.0 <= sent[1][1] < 2.2


def test_ctrl_c_under_the_process_manager_stops_the_controller_before_kubesim(tmp_path):
    """Real processes under run.py's honcho manager: 'kubesim' notes when it got SIGTERM, 'controller' takes
    0.5 s to stop (as one releasing its Lease) and notes when it is done."""

    def child(name: str, delay: float) -> str:
        code = (
            "import signal, sys, time, pathlib\n"
            f"p = pathlib.Path({str(tmp_path)!r})\n"
            "def stop(*_):\n"
            f"    time.sleep({delay}); (p / {name + '.stopped'!r}).write_text(repr(time.time())); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, stop)\n"
            f"(p / {name + '.ready'!r}).write_text('1')\n"
            "while True: time.sleep(0.05)\n"
        )
        return f"{name}: {shlex.quote(sys.executable)} -c {shlex.quote(code)}"

    lines = [child("kubesim", 0.0), child("controller", 0.5)]
    runner = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from scripts.run import run_procfile; "
              f"sys.exit(run_procfile({lines!r}, dict(__import__('os').environ)))")
    proc = subprocess.Popen([sys.executable, "-c", runner], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not all((tmp_path / f"{n}.ready").exists() for n in ("kubesim", "controller")):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read().decode()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
        out = proc.communicate(timeout=20)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    controller_done = float((tmp_path / "controller.stopped").read_text())
    kubesim_signalled = float((tmp_path / "kubesim.stopped").read_text())
    assert kubesim_signalled >= controller_done, out
    assert out.index("SIGTERM to controller") < out.index("SIGTERM to kubesim"), out
    assert proc.returncode == 0, out  # a clean Ctrl-C: no `make: *** Error 130`


def test_the_exit_status_is_zero_after_a_clean_stop_by_signal_only():
    from scripts.run import exit_status

    assert [exit_status(130, False), exit_status(143, False)] == [0, 0]  # Ctrl-C, SIGTERM: all stopped
    assert exit_status(130, True) == 1  # something had to be SIGKILLed
    assert [exit_status(3, False), exit_status(None, False), exit_status(0, False)] == [3, 0, 0]


def test_celerys_root_warning_alone_is_filtered_and_only_for_root():
    from scripts.run import root_warning_filter

    assert root_warning_filter(1000) == ""
    probe = ("import warnings; from celery.platforms import ROOT_DISCOURAGED; from celery.exceptions import "
             "SecurityWarning; warnings.warn(SecurityWarning(ROOT_DISCOURAGED.format(uid=0, euid=0, gid=0, egid=0)));"
             " warnings.warn(SecurityWarning('another warning'))")
    # through a shell, as honcho runs the Procfile's lines
    out = subprocess.run(f"{shlex.quote(sys.executable)}{root_warning_filter(0)} -c {shlex.quote(probe)}",
                         shell=True, capture_output=True, text=True, check=True).stderr
    assert "superuser privileges" not in out and "another warning" in out, out


def test_the_sandbox_runs_two_worker_processes_per_core_between_two_and_four():
    from scripts.run import procfile_lines, worker_concurrency

    assert [worker_concurrency(n) for n in (1, 2, 3, 16)] == [2, 4, 4, 4]
    (worker,) = [line for line in procfile_lines({}, Path("/tmp/x"), "admin") if line.startswith("worker:")]
    assert f"--concurrency {worker_concurrency()} " in worker


def test_the_readmes_process_table_names_every_process_make_run_starts(tmp_path):
    from scripts.run import procfile_lines

    everything = {"OPSCONSOLE_EMBEDDED_REDIS": "1", "OPSCONSOLE_KUBESIM": "1", "KUBECONFIG": str(tmp_path / "k")}
    started = {line.partition(":")[0] for line in procfile_lines(everything, tmp_path, "login")}
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| process | what it is |"):].split("\n\n")[0]
    named = set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.M))
    assert started >= {"redis", "kubesim", "kubesim-2", "controller", "controller-2", "worker", "web", "announce",
                       "webhooks", "webhooks-2", "demo"}
    assert named == started
