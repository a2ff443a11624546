"""Command line: ``python -m kubesim --port 6443 --kubeconfig PATH [--data-dir DIR]`` and friends."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import signal
import sys
from pathlib import Path

from kubesim.kubeconfig import write_kubeconfig
from kubesim.options import DEFAULT_ZONES, Faults, KubeletOptions, Options
from kubesim.simulator import Simulator


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (flags are documented in kubesim/README.md)."""
    p = argparse.ArgumentParser(prog="python -m kubesim", description="A Kubernetes API emulator.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=6443, help="port to listen on; 0 picks a free one (default 6443)")
    p.add_argument("--kubeconfig", default="kubesim.kubeconfig", help="where to write the kubeconfig")
    p.add_argument("--context", default="kubesim",
                   help="the name of the kubeconfig's context, cluster and user (default kubesim)")
    p.add_argument("--data-dir", default=None, help="persist objects here across restarts")
    auth = p.add_mutually_exclusive_group()
    auth.add_argument("--token", default=None, help="bearer token to require (default: a random one)")
    auth.add_argument("--no-auth", action="store_true", help="accept unauthenticated requests")
    p.add_argument("--token-auth-file", default=None,
                   help="more bearer tokens, kube-apiserver's format: token,user,uid,\"group1,group2\" per line")
    p.add_argument("--authorization-mode", default="AlwaysAllow", choices=("AlwaysAllow", "RBAC"),
                   help="AlwaysAllow (default) or RBAC: roles and bindings enforced, 403 Forbidden otherwise")
    p.add_argument("--webhook-client-cert", default=None,
                   help="PEM certificate kubesim presents to admission and conversion webhooks (mutual TLS)")
    p.add_argument("--webhook-client-key", default=None, help="PEM private key for --webhook-client-cert")
    p.add_argument("--no-tls", action="store_true",
                   help="serve plain HTTP even with a token (kubectl then sends no token)")
    p.add_argument("--tls-cert", default=None, help="PEM certificate (default: self-signed, made with openssl)")
    p.add_argument("--tls-key", default=None, help="PEM private key for --tls-cert")
    p.add_argument("--history-size", type=int, default=10000, help="watch events kept for replay")
    p.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between watch BOOKMARKs")
    p.add_argument("--no-controllers", action="store_true", help="do not run the simulated controllers")
    p.add_argument("--nodes", type=int, default=int(os.environ.get("KUBESIM_NODES") or Options().nodes),
                   help="Nodes a new cluster registers (env KUBESIM_NODES; default 3)")
    p.add_argument("--zones", default=os.environ.get("KUBESIM_ZONES") or ",".join(DEFAULT_ZONES),
                   help="comma-separated zones the Nodes are spread over in turn (env KUBESIM_ZONES)")
    k = KubeletOptions()
    p.add_argument("--schedule-delay", type=float, default=k.schedule_delay, help="seconds until a Pod is bound")
    p.add_argument("--start-delay", type=float, default=k.start_delay, help="seconds until a Pod runs")
    p.add_argument("--ready-delay", type=float, default=k.ready_delay, help="seconds until a running Pod is Ready")
    p.add_argument("--terminate-delay", type=float, default=k.terminate_delay,
                   help="seconds a gracefully deleted Pod stays Terminating")
    p.add_argument("--image-pull-backoff", type=float, default=k.image_pull_backoff,
                   help="seconds from a failed image pull's ImagePullBackOff to the next attempt (doubles)")
    p.add_argument("--image-pull-backoff-max", type=float, default=k.image_pull_backoff_max,
                   help="the most seconds between two image pull attempts")
    p.add_argument("--broken-image-marker", action="append", default=None,
                   help="image tags containing this stay in ImagePullBackOff (repeatable)")
    p.add_argument("--crash-image-marker", action="append", default=None,
                   help="image tags containing this go to CrashLoopBackOff (repeatable)")
    f = Faults()
    p.add_argument("--fault-error-rate", type=float, default=f.error_rate, help="share of requests that fail")
    p.add_argument("--fault-error-code", type=int, default=f.error_code, choices=(429, 500, 503))
    p.add_argument("--fault-retry-after", type=int, default=f.retry_after, help="Retry-After seconds for 429")
    p.add_argument("--fault-latency-ms", type=float, default=0.0, help="latency added to API requests")
    p.add_argument("--fault-latency-rate", type=float, default=f.latency_rate,
                   help="share of API requests the latency is added to")
    p.add_argument("--fault-watch-cut-after", type=int, default=0, help="end watches after N events")
    p.add_argument("--fault-watch-cut-interval", type=float, default=0.0,
                   help="drop every watch's connection this many seconds after it opened")
    p.add_argument("--log-level", default="INFO")
    return p


TOKEN_FILE = "token"


def generated_token(data_dir: str | None) -> str:
    """A random bearer token; with a data dir, the one stored there (`<data-dir>/token`, owner-only), minted and
    stored on the first start, so that clients holding it keep working across restarts."""
    if not data_dir:
        return secrets.token_urlsafe(24)
    path = Path(data_dir) / TOKEN_FILE
    try:
        stored = path.read_text().strip()
    except FileNotFoundError:
        stored = ""
    if stored:
        return stored
    token = secrets.token_urlsafe(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)
    return token


def options_from_args(args: argparse.Namespace) -> Options:
    """Options from parsed arguments."""
    kubelet = KubeletOptions(schedule_delay=args.schedule_delay, start_delay=args.start_delay,
                             ready_delay=args.ready_delay, terminate_delay=args.terminate_delay,
                             image_pull_backoff=args.image_pull_backoff,
                             image_pull_backoff_max=args.image_pull_backoff_max)
    if args.broken_image_marker:
        kubelet.broken_image_markers = args.broken_image_marker
    if args.crash_image_marker:
        kubelet.crash_image_markers = args.crash_image_marker
    faults = Faults(error_rate=args.fault_error_rate, error_code=args.fault_error_code,
                    retry_after=args.fault_retry_after, latency=args.fault_latency_ms / 1000.0,
                    latency_rate=args.fault_latency_rate, watch_cut_after=args.fault_watch_cut_after,
                    watch_cut_interval=args.fault_watch_cut_interval)
    token = None if args.no_auth else (args.token or generated_token(args.data_dir))
    zones = [z.strip() for z in args.zones.split(",") if z.strip()]
    if args.nodes < 1 or not zones:
        raise ValueError("--nodes must be at least 1 and --zones must name at least one zone")
    return Options(host=args.host, port=args.port, token=token, data_dir=args.data_dir,
                   tls=bool(token) and not args.no_tls, tls_cert=args.tls_cert, tls_key=args.tls_key,
                   history_size=args.history_size, bookmark_interval=args.bookmark_interval,
                   controllers=not args.no_controllers, kubelet=kubelet, faults=faults,
                   token_auth_file=args.token_auth_file, authorization_mode=args.authorization_mode,
                   webhook_client_cert=args.webhook_client_cert, webhook_client_key=args.webhook_client_key,
                   nodes=args.nodes, zones=zones)


async def serve(options: Options, kubeconfig: str, context: str = "kubesim") -> None:
    """Run until SIGINT or SIGTERM."""
    sim = Simulator(options)
    await sim.start()
    write_kubeconfig(kubeconfig, sim.url, options.token, sim.certificate_pem(), name=context)
    print(f"kubesim serving {sim.url} (kubeconfig: {kubeconfig})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await sim.stop()
        print("kubesim stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    try:
        asyncio.run(serve(options_from_args(args), args.kubeconfig, args.context))
    except (OSError, ValueError) as e:  # a port in use, an unreadable token file
        print(f"kubesim: {e}", file=sys.stderr)
        return 1
    return 0
