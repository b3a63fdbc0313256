"""The daemon alerts when every verdict halts and nothing can be sealed: a real daemon
process, a real local webhook, a real PostgreSQL server stopped and started.

Each incident is told once when it begins and once (``recovered``) when it clears,
however many checks see it in between.
"""

import time
from pathlib import Path

from tests.conftest import run_process
from tests.integration.test_daemon_alerts import alert_env, daemon, verdict, webhook
from tests.integration.test_pg_faults import init_host
from tests.pg import PgServer


def _events(bodies: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(body["event"], body["scope"]) for body in bodies]


def test_a_torn_chain_is_one_broken_alert_and_recover_one_recovered(home: Path):
    with webhook() as hook:
        env = alert_env(hook.url)
        assert verdict(home, env, "1") == 0
        with daemon(home, env):
            chain = home / "events.jsonl"
            # A write cut short: the last line loses its end.
            chain.write_bytes(chain.read_bytes()[:-7])
            assert verdict(home, env, "1") == 1  # halt-uncertainty, and nothing sealed
            bodies = hook.wait_for(1)
            assert _events(bodies) == [("broken", "chain")]
            assert "torn line" in str(bodies[0]["text"])
            assert "ledger recover" in str(bodies[0]["text"])
            # Several more checks see it still torn: no second message.
            time.sleep(3)
            assert len(hook.bodies) == 1
            recovered = run_process(["--home", str(home), "recover"], env)
            assert recovered.code == 0, recovered.stderr
            bodies = hook.wait_for(2)
            assert _events(bodies) == [("broken", "chain"), ("recovered", "chain")]
            assert verdict(home, env, "1") == 0
            time.sleep(3)
        assert len(hook.bodies) == 2


def test_a_stopped_database_is_one_unavailable_alert_and_one_recovered(
    own_pg_server: PgServer, tmp_path: Path
):
    home = tmp_path / "host"
    init_host(home, own_pg_server.url, "fleet")
    with webhook() as hook:
        env = alert_env(hook.url, on=["unavailable", "broken"])
        with daemon(home, env) as lines:
            assert verdict(home, env, "1") == 0
            own_pg_server.stop("immediate")
            bodies = hook.wait_for(1)
            assert _events(bodies) == [("unavailable", "store")]
            assert own_pg_server.root.name in str(bodies[0]["text"])
            time.sleep(3)
            assert len(hook.bodies) == 1
            own_pg_server.start()
            bodies = hook.wait_for(2)
            assert _events(bodies) == [("unavailable", "store"), ("recovered", "store")]
            assert lines.wait_for("alert sent", count=2)
            time.sleep(2)
        assert len(hook.bodies) == 2


def test_an_uncertainty_every_verdict_meets_is_told_once_and_its_end(home: Path):
    """Billing too old near the cap: a verdict halts; the daemon tells it once, then its end."""
    with webhook() as hook:
        env = alert_env(hook.url, on=["uncertainty"])
        env["LEDGER_BILLING_STALE_HALT_PCT"] = "50"
        assert (
            run_process(["--home", str(home), "record", "6", "--provider", "openai"], env).code == 0
        )
        with daemon(home, env):
            bodies = hook.wait_for(1)
            assert _events(bodies) == [("uncertainty", "aggregate")]
            assert "billing_stale" in str(bodies[0]["text"])
            assert verdict(home, env, "1") == 1  # the sealed halt: already told
            time.sleep(3)
            assert len(hook.bodies) == 1
        # The threshold raised: nothing halts any more.
        env = {**env, "LEDGER_BILLING_STALE_HALT_PCT": "100"}
        with daemon(home, env):
            bodies = hook.wait_for(2)
        assert _events(bodies) == [("uncertainty", "aggregate"), ("recovered", "aggregate")]
