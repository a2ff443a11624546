"""The curve: two Markdown tables (at rest; operations), one row per tree and N, and a PNG chart of CPU % of one
core and RSS KB per managed object against N, one line style per tree."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

GROUPS = ("controller", "workers", "kubesim")


def _f(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.{digits}f}"


def _three(d: dict[str, float] | None, digits: int = 1) -> str:
    return " / ".join(_f((d or {}).get(g), digits) for g in GROUPS)


def rest_table(results: list[dict[str, Any]]) -> str:
    """At rest: convergence, idle CPU, reconciles, memory per process and per object, Redis and PostgreSQL."""
    rows = ["| tree | N | all Running after (s) | idle CPU % of a core: controller / workers / kubesim "
            "| reconciles at rest (runs/min) | RSS MiB: controller / workers / kubesim "
            "| RSS KB per object: controller / workers / kubesim | Redis B/object | PostgreSQL KB/object |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if "cpu_percent" not in r:
            rows.append(f"| {r['tree']} | {r['n']:,} | failed: {r.get('error', '')[:160]} | | | | | | |")
            continue
        per_min = r["rest_runs"] / r["rest_window_seconds"] * 60
        rows.append(f"| {r['tree']} | {r['n']:,} | {_f(r['converge_seconds'])} | {_three(r['cpu_percent'], 2)} "
                    f"| {r['rest_runs']:,} ({_f(per_min)}) | {_three(r['rss_mib'], 0)} "
                    f"| {_three(r['rss_kb_per_object'])} | {_f(r['redis_db_bytes_per_object'], 0)} "
                    f"| {_f(r['pg_bytes_per_object'] / 1024)} |")
    return "\n".join(rows)


def _ms(pair: list[float] | None) -> str:
    return f"{_f(pair[0])} / {_f(pair[1])}" if pair else "—"


def _probe(d: dict[str, Any] | None) -> str:
    if not d:
        return "—"
    return f"{_f(d['probe_seconds'])} / {_f(d['idle_after_seconds'])} / {d['runs']:,}"


def _cmd(cmds: dict[str, Any], name: str) -> str:
    c = cmds.get(name)
    return "—" if c is None else _f(c["seconds"], 2) + ("" if c["rc"] == 0 else f" (exit {c['rc']})")


def operations_table(results: list[dict[str, Any]]) -> str:
    """After the rest window: the pages, the audit commands, start-up and failover."""
    rows = ["| tree | N | overview p50 / p95 (ms) | resources p50 / p95 (ms) | audit_verify (s) "
            "| audit_checkpoint (s) | Django start-up (s) | start-up: probe reconciled / queue idle (s) / runs "
            "| failover: probe reconciled / queue idle (s) / runs |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        pages, cmds = r.get("pages") or {}, r.get("commands") or {}

        rows.append(f"| {r['tree']} | {r['n']:,} | {_ms(pages.get('overview'))} | {_ms(pages.get('resources'))} "
                    f"| {_cmd(cmds, 'audit_verify')} | {_cmd(cmds, 'audit_checkpoint')} | {_cmd(cmds, 'django_setup')} "
                    f"| {_probe(r.get('startup'))} | {_probe(r.get('failover'))} |")
    return "\n".join(rows)


def render(results: list[dict[str, Any]]) -> str:
    """Both tables, with the errors, if any, after them."""
    errors = [f"- {r['tree']} N={r['n']}: {r['error']}" for r in results if r.get("error")]
    return "\n\n".join([rest_table(results), operations_table(results), *(["errors:\n" + "\n".join(errors)]
                                                                         if errors else [])])


def chart(results: list[dict[str, Any]], path: Path) -> None:
    """CPU % of one core at rest and RSS KB per managed object against N, per process group and tree."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trees = list(dict.fromkeys(r["tree"] for r in results))
    legend_rows = len(trees)
    fig, (cpu_ax, mem_ax) = plt.subplots(1, 2, figsize=(11, 4.2 + 0.2 * legend_rows))
    colors = {"controller": "tab:blue", "workers": "tab:orange", "kubesim": "tab:gray"}
    styles = ["-", "--", ":", "-."]
    for i, tree in enumerate(trees):
        rows = sorted((r for r in results if r["tree"] == tree and "cpu_percent" in r), key=lambda r: r["n"])
        ns = [r["n"] for r in rows]
        for group in GROUPS:
            label = f"{group} ({tree})" if len(trees) > 1 else group
            style = dict(color=colors[group], linestyle=styles[i % len(styles)], marker="o")
            cpu_ax.plot(ns, [r["cpu_percent"][group] for r in rows], label=label, **style)
            mem_ax.plot(ns, [r["rss_kb_per_object"][group] for r in rows], label=label, **style)
    cpu_ax.set(title="CPU at rest", xlabel="managed objects (N)", ylabel="% of one core")
    mem_ax.set(title="memory per managed object", xlabel="managed objects (N)", ylabel="RSS KB per object")
    wide = max(r["n"] for r in results) >= 10 * min(r["n"] for r in results)
    for ax in (cpu_ax, mem_ax):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        if wide:  # 1,000 to 50,000: each size readable
            ax.set_xscale("log")
    handles, labels = cpu_ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(GROUPS), fontsize=8, handlelength=4)
    fig.tight_layout(rect=(0, 0.02 + 0.04 * legend_rows, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
