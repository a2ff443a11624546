"""`manage.py replay RUN_ID [--json]`: re-execute a kept run's step offline with today's code, against a kubesim of
its own seeded with the inputs the run read, and say whether it reaches the same outcome (phase, result, queue
action, children); see `reconcilers.services.replay`. The exit status is 1 when the outcome differs or the run
cannot be replayed (no inputs kept, inputs gone past their retention, a kind version no longer served: the message
says which), so a team can run it over recorded runs before shipping a new version of its kind."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine.capture_store import CaptureMissing, capture_inputs
from reconcilers.services.replay import ReplayRefused, ReplayReport, run_replay


def render(report: ReplayReport) -> list[str]:
    """The report as lines of text."""
    rec, rep = report.recorded, report.replayed
    lines = [f"replay      run {report.run_id}  {report.key}  ({report.kind_version}; recorded by "
             f"{report.recorded_operator_version or 'unknown'}, replayed with {report.operator_version or 'unknown'}, "
             f"{report.seconds:.2f}s)"]
    for name in ("phase", "result", "queue"):
        mark = "same" if rec.get(name) == rep.get(name) else "DIFFERENT"
        lines.append(f"{name:<11} recorded {rec.get(name)!s:<14} replayed {rep.get(name)!s:<14} {mark}")
    for child in report.children:
        where = f"{child.namespace}/{child.name}" if child.namespace else child.name
        lines.append(f"child       {child.kind} {where}: {child.change.replace('_', ' ')}")
        lines += [f"  {c.path}: {json.dumps(c.before)} -> {json.dumps(c.after)}" for c in child.fields]
    lines.append("outcome     " + ("the same" if report.same else f"DIFFERENT ({len(report.differences)})"))
    return lines


class Command(BaseCommand):
    help = "Replay a kept run offline with today's code and compare its outcome with the recorded one."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int, help="the run's id (the console's run page, /api/v1/runs/{id})")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--export", metavar="PATH", help="write the run's kept inputs to PATH (JSON) instead: "
                                                             "the pytest plugin's replay_run(PATH) replays them")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["export"]:
            try:
                kept = capture_inputs(options["run_id"])
            except CaptureMissing as exc:
                raise CommandError(f"{exc.why}: {exc}") from exc
            with open(options["export"], "w", encoding="utf-8") as out:
                json.dump(kept.inputs, out, indent=1, default=str)
            self.stdout.write(f"exported    run {options['run_id']}  {kept.inputs.get('key')}  -> {options['export']}")
            return
        try:
            report = run_replay(options["run_id"])
        except ReplayRefused as exc:
            raise CommandError(f"{exc.why}: {exc}") from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2, default=str))
        else:
            self.stdout.write("\n".join(render(report)))
        if not report.same:
            raise CommandError("the replay reached another outcome: " + "; ".join(report.differences))
