"""The API's serializers, one module per resource: output shapes of the reads, and input shapes (query filters and
action bodies) that name each bad field in a 400. No logic: values come from selectors and services.

- `common`: what every resource shares (the cluster filters, how an actor was established, errors, readiness);
- `resources`: kinds, resources (list and detail, their children) and a resource's Events;
- `history`: transitions (the feed, its exports) and reconcile runs;
- `reconcile_requests`: manual and bulk reconciles;
- `workqueue`: the queue now and its admin controls;
- `metrics`: the metrics summary;
- `accounts`: tokens, the caller, the action record;
- `healing`: the healing API's (`opsconsole.api.healing`).
"""
