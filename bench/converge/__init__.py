"""`python -m bench.converge`: how fast N Memcached CRs converge, opsconsole (1 and 2 Celery workers) vs kopf.

Each scenario gets a fresh kubesim subprocess (identical options, zero kubelet delays), and opsconsole
scenarios a fresh PostgreSQL database (cloned from a migrated template) and a flushed Redis db. The
operator under test runs as real processes: `manage.py runcontroller` + `celery worker -c K` (prefork), or
`kopf run --standalone` with `bench.converge.kopf_operator`, which calls the same
reconcile step for `MemcachedReconciler` (`reconcilers.engine.step`) that opsconsole's runner calls.

Per scenario it measures a burst (N creates as fast as the bench can send them, until all are Running:
converge time, reconciles/s, create → first reconcile start p50/p99) and a steady phase (CRs created at a
fixed rate: create → first reconcile start p50/p99), plus CPU seconds and peak RSS (VmHWM) per process
read from /proc just before the processes are stopped.

With `--clusters C` each opsconsole scenario also runs over C clusters at once (`opsconsole-K@C`: C kubesims, a
controller per cluster, the same workers; `bench.converge.clusters`), alternating with its single-cluster run, and
the report compares each cluster's converge rate and the operator CPU per CR with the single-cluster runs'.
"""
