"""The runaway loop row of bench_gateway: agent loops streaming against a $1 cap until halted.

8 loops stream through the gateway as fast as they can, a file observer
answering fresh readings; the row gives the spend recorded once every loop
has been halted, as % of the cap.
"""

import datetime as dt
import json
import threading
from pathlib import Path

import httpx
from bench_gateway import ANTHROPIC, Gateway, body, check, make_home


def runaway(base: str, loops: int) -> tuple[int, int]:
    """Agent loops streaming as fast as they can until halted; (calls made, halts seen)."""
    made = [0] * loops

    def agent(number: int) -> None:
        with httpx.Client(base_url=base, headers=ANTHROPIC, timeout=120) as client:
            while True:
                with client.stream("POST", "/v1/messages", content=body(stream=True)) as response:
                    if response.status_code == 402:
                        response.read()
                        return
                    check(response.status_code == 200, response.status_code)
                    for _ in response.iter_raw():
                        pass
                made[number] += 1

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(loops)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(made), loops


def spent_micros(home: Path) -> int:
    total = 0
    for line in (home / "events.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["event_type"] == "budget.record_call":
            total += entry["payload"]["actual_micros"] or 0
    return total


def runaway_row(root: Path, upstream_url: str) -> None:
    """8 agent loops against a $1 cap with fresh billing readings: the spend at the halt."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reading = root / "billing.json"
    reading.write_text(json.dumps({"usd_used": 0, "billing_ts": now, "server_ts": now}))
    home = make_home(root, upstream_url, "1", observer_file=reading)
    gateway = Gateway(home)
    made, halted = runaway(gateway.url, 8)
    gateway.stop()
    spent = spent_micros(home)
    print(
        f"runaway loop             : 8 loops, {made} calls until all {halted} were halted; "
        f"spend at the halt {spent / 1e6:.6f} USD = {spent / 1e4:.2f} % of the $1 cap"
    )
