"""`python -m bench.scale`: how the operator's cost grows with the size of the fleet (issue 40).

For each N, a fresh kubesim, database and Redis database; the controller and a prefork Celery worker started as
processes (bench/converge's harness), pointed at a project tree (`--project-root`, so a worktree of an older commit
can be measured from this one); N objects created and converged; then, at rest for `--rest-seconds`: CPU per
process (% of one core), RSS per process and per managed object, Redis and PostgreSQL bytes per object and the
reconciles the resync ran; then the console's overview and resources pages (p95), `audit_verify` and one audit
checkpoint, the controller's start-up (stopped, started again) and a failover (a standby beside the leader, the
leader SIGKILLed). Modules: kinds.py (what is created), measure.py (readers of /proc, Redis, PostgreSQL and the
runs), fleet.py (one N end to end), operations.py (start-up, failover, the commands), pages.py (the console pages,
run in the tree under test), report.py (the table and the chart).
"""
