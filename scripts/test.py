"""`make test`: run the whole suite with what it needs (a Redis; kubesim and workers start in fixtures).

Uses the Redis on 127.0.0.1:6379 when it answers (database 15, so a running product on database 0 is
untouched), else starts an embedded Redis for the run and stops it afterwards. DATABASE_URL, when set,
points the suite at PostgreSQL; otherwise it runs on SQLite. Arguments are passed to pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.redis_local import redis_answers, start_embedded_redis  # noqa: E402

EMBEDDED_REDIS_PORT = 6391


def main(argv: list[str]) -> int:
    """Run pytest; its exit status is ours (no tests collected counts as a failure)."""
    env = dict(os.environ)
    data_dir = Path(env.setdefault("OPSCONSOLE_DATA_DIR", str(ROOT / "data" / "test")))
    data_dir.mkdir(parents=True, exist_ok=True)
    redis_proc = None
    if "REDIS_URL" not in env:
        if redis_answers("127.0.0.1", 6379):
            env["REDIS_URL"] = "redis://127.0.0.1:6379/15"
        else:
            print(f"no Redis on 127.0.0.1:6379: starting an embedded one on port {EMBEDDED_REDIS_PORT}")
            redis_proc = start_embedded_redis(EMBEDDED_REDIS_PORT, data_dir / "redis")
            env["REDIS_URL"] = f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/15"
    print(f"tests: REDIS_URL={env['REDIS_URL']} DATABASE_URL={env.get('DATABASE_URL', '(SQLite)')}", flush=True)
    try:
        rc = subprocess.call([sys.executable, "-m", "pytest", *argv], cwd=ROOT, env=env)
    finally:
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)
    return 1 if rc == 5 else rc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
