"""`manage.py explain KEY`: why an object is in its phase, from the record (`reconcilers.services.explain`) — the
same answer as the detail page's first panel and `GET …/explain`.

KEY is the workqueue key (`group/version/plural/namespace/name`), or `<kind> <namespace>/<name>` in two
arguments. `--json` prints the answer as JSON. Exit status 1 when nothing on record has that key.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine import registry
from reconcilers.models import Resource
from reconcilers.services import explain


class Command(BaseCommand):
    help = "Why an object is in its phase, from the record: the transition, the run, its triggers, the children."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="group/version/plural/namespace/name, or a kind (with TARGET)")
        parser.add_argument("target", nargs="?", default=None, help="<namespace>/<name> when KEY is a kind")
        parser.add_argument("--json", action="store_true", help="the answer as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        key = options["key"]
        if options["target"] is not None:
            try:
                kind = registry.for_name(key).resource
            except registry.UnknownKind as exc:
                raise CommandError(str(exc)) from exc
            namespace, _, name = options["target"].rpartition("/")
            key = kind.request(namespace, name).key()
        resource = Resource.objects.filter(key=key).order_by("deleted", "-created_at", "-id").first()
        if resource is None:
            raise CommandError(f"key: nothing on record is {key!r} (group/version/plural/namespace/name)")
        answer = explain.explain(resource)
        if options["json"]:
            self.stdout.write(json.dumps(answer, default=str, indent=2))
            return
        self.stdout.write(answer["summary"])
        self.stdout.write("")
        transition, run = answer["transition"], answer["run"]
        if transition is not None:
            self.stdout.write(f"transition  #{transition['seq']} {transition['from_phase'] or '(none)'} -> "
                              f"{transition['to_phase']} at {transition['at']:%Y-%m-%d %H:%M:%S} "
                              f"({transition['reason'] or 'no reason'}; actor {transition['actor']}, "
                              f"{transition['established']})")
        if run is not None:
            trace = f", trace {run['trace_id']}" if run["trace_id"] else ""
            self.stdout.write(f"run         {run['id']}: {run['result']}, attempt {run['attempt']}, "
                              f"{run['duration_seconds']:.3f} s{trace}")
            for trigger in run["triggers"]:
                self.stdout.write(f"  trigger   {trigger['text']}")
            if run["triggers_dropped"]:
                self.stdout.write(f"  and {run['triggers_dropped']} more coalesced (not kept)")
        children = answer["children"]
        self.stdout.write(f"children    {children['summary']}")
        for event in children["events"]:
            obj = event["object"]
            self.stdout.write(f"  {event['type']:<8} {obj['kind']} {obj['name']}: {event['reason']} {event['message']}")
        for anomaly in answer["anomalies"]:
            self.stdout.write(f"anomaly     {anomaly['category']}: {anomaly['detail']}")
