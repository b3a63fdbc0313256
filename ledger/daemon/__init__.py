"""``ledger daemon``: APScheduler 3 in the foreground, running the same jobs as cron.

Jobs: reconcile every ``reconcile.interval_hours`` for each provider in
``reconcile.providers`` (first run at start); a poll of each of those providers'
bill every ``billing.poll_seconds`` (first run one interval after start; none when
it is 0 or no ``observer.command`` is set), so spend made outside ``ledger``
reaches every verdict within one poll; a snapshot on ``snapshot.cron`` (UTC); and
a full verification of the chain every ``chain.verify_interval_hours`` (first run
at start; none when it is 0), whose BROKEN finding halts every verdict until
``ledger recover``.
A daily snapshot missed while the daemon was down is taken at start. Missed runs
coalesce into one, a job never runs twice at once, each run is logged as one line
on stderr, and SIGTERM/SIGINT stop it cleanly. Under systemd (``NOTIFY_SOCKET``
set) it reports ``READY=1`` once scheduled.

Unless told not to, it also runs ``ledger serve`` for its home (SPEC §9) as a
child process, restarted if it dies and drained on stop. A child rather than a
thread: the server takes on each client's environment and directory for the
length of a request, which the scheduler's threads must never see. When
``proxy.listen`` is set it runs the gateway ``ledger proxy`` the same way (its
web stack stays out of the daemon's process).
"""

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from ledger.core.console_config import console_address
from ledger.core.proxy_config import open_listen
from ledger.daemon.jobs import (
    VerifyJob,
    alerts_job,
    log_line,
    poll_job,
    prime_alerts_job,
    reconcile_job,
    snapshot_job,
    spool_job,
)
from ledger.daemon.stop_signals import StopSignals
from ledger.edges.processes import PARENT_ENV, check_free
from ledger.errors import ConfigError
from ledger.runtime import Runtime

_DAY_SECONDS = 86_400
_SPOOL_SECONDS = 30
# The daemon catches the rollups up this often (the writers fold them sooner).
_ROLLUP_SECONDS = 5
_SERVE_DRAIN_SECONDS = 15.0
_GATEWAY_DRAIN_SECONDS = 600.0
_EXIT_CONFIG = 78
_EXIT_BUSY = 75


def notify_systemd(state: str) -> None:
    """Send an sd_notify message when run as a systemd ``Type=notify`` service."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(address)
            sock.sendall(state.encode("ascii"))
        except OSError as exc:
            log_line(f"sd_notify failed: {exc}")


_CONSOLE_DRAIN_SECONDS = 5.0  # open live feeds are cut; a page answer is quick


class ServerProcess:
    """``ledger serve`` (or ``ledger proxy``) for the daemon's home, restarted when it dies.

    The child is told the daemon's pid (``LEDGER_PARENT_PID``) and ends when
    the daemon does, ``kill -9`` included (``ledger.edges.processes``). A child
    that exits with one of ``fatal`` codes is not restarted: ``on_fatal`` is
    called with the code (the gateway's address taken: the daemon stops, 75).
    """

    def __init__(
        self,
        runtime: Runtime,
        command: str = "serve",
        drain_seconds: float = _SERVE_DRAIN_SECONDS,
        on_fatal: Callable[[int], None] | None = None,
    ) -> None:
        self._argv = [sys.executable, "-m", "ledger", "--home", str(runtime.home), command]
        self._command = command
        self._drain_seconds = drain_seconds
        self._on_fatal = on_fatal
        self._environ = {**runtime.environ, PARENT_ENV: str(os.getpid())}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._run, name=f"ledger-{command}", daemon=True)

    def start(self) -> "ServerProcess":
        """Start the server and its watcher."""
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stop.is_set():
                    return
                proc = subprocess.Popen(self._argv, env=self._environ, stdin=subprocess.DEVNULL)
                self._proc = proc
            code = proc.wait()
            if self._stop.is_set():
                return
            if code == _EXIT_CONFIG:
                log_line(f"{self._command}: exited {code} (configuration error); not restarted")
                return
            if code == _EXIT_BUSY and self._on_fatal is not None:
                log_line(f"{self._command}: exited {code} (its address is taken); not restarted")
                self._on_fatal(code)
                return
            # 75: another server answers for the home; try again later.
            pause = 30.0 if code == _EXIT_BUSY else 1.0
            log_line(f"{self._command}: exited {code}; restarting in {pause:g} s")
            self._stop.wait(pause)

    def stop(self) -> None:
        """SIGTERM the server (it answers what it has accepted) and wait for it."""
        with self._lock:
            self._stop.set()
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self._drain_seconds)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._thread.join(timeout=self._drain_seconds)


def run_daemon(home_runtime: Runtime, *, serve: bool = True) -> int:
    """Schedule the jobs (and ``ledger serve`` unless ``serve`` is false); block until SIGTERM.

    SIGTERM or SIGINT at any moment after the handlers are in place (the first
    thing done here) stops it and returns 0: a job already running finishes
    (its writes are never cut short), nothing new starts.

    Raises:
        ConfigError: ``LEDGER_NOW`` is set, or the configuration is invalid.
    """
    if home_runtime.environ.get("LEDGER_NOW"):
        raise ConfigError("LEDGER_NOW is set: the daemon schedules on the real clock only")
    failed: list[int] = []

    def on_fatal(code: int) -> None:
        # The gateway cannot listen: stop as if asked, and exit with its code.
        failed.append(code)
        os.kill(os.getpid(), signal.SIGTERM)

    with StopSignals() as stop:
        scheduler, polling = _scheduler(home_runtime)
        if stop.received is not None:
            # Asked to stop while starting: start nothing.
            log_line(f"received {stop.received.name} while starting, stopping")
            log_line("stopped")
            return 0
        config = home_runtime.config
        listen = config.proxy.listen
        if listen is not None:
            # A gateway that would listen where it must not, or where another
            # process listens already, is refused before anything starts.
            address = open_listen(listen, "proxy.listen", config.proxy)
            check_free(address.host, address.port, str(address), "proxy.listen")
        if config.console.listen is not None:
            console_address(config.console, None)  # refused (78) before anything starts
        prime_alerts_job(home_runtime)
        scheduler.start()
        server = gateway = console = None
        try:
            if config.console.listen is not None:
                console = ServerProcess(home_runtime, "console", _CONSOLE_DRAIN_SECONDS).start()
            server = ServerProcess(home_runtime).start() if serve else None
            if listen is not None:
                # Streams in flight finish within the upstream timeout; wait for them.
                drain = float(config.proxy.upstream_timeout_seconds or _GATEWAY_DRAIN_SECONDS)
                gateway = ServerProcess(home_runtime, "proxy", drain, on_fatal).start()
            log_line(_started_line(config, polling, serving=server is not None, console=console))
            notify_systemd("READY=1")
            log_line(f"received {stop.wait().name}, stopping")
        finally:
            notify_systemd("STOPPING=1")
            if console is not None:
                console.stop()
            if gateway is not None:
                gateway.stop()
            if server is not None:
                server.stop()
            _shutdown(scheduler, config.store_url)
    log_line("stopped" + (f" (exit {failed[0]}: the gateway could not listen)" if failed else ""))
    return failed[0] if failed else 0


def _started_line(config: Any, polling: bool, *, serving: bool, console: object | None) -> str:
    """The daemon's ``started:`` line: what it runs, how often, and where it listens."""
    listen = config.proxy.listen
    if polling:
        poll_text = f"poll every {config.poll_seconds} s"
    elif config.poll_seconds > 0:
        poll_text = "polling off (no observer.command)"
    else:
        poll_text = "polling off (billing.poll_seconds = 0)"
    verify_hours = float(config.verify_interval_hours)
    if config.observer_command is None:
        reconcile_text = "reconcile off (no observer.command)"
    else:
        reconcile_text = (
            f"reconcile every {float(config.interval_hours):g} h for "
            f"{', '.join(config.reconcile_providers)}"
        )
    return (
        f"started: {reconcile_text}; {poll_text}; "
        f"snapshot on '{config.snapshot_cron}' UTC; "
        + (f"verify every {verify_hours:g} h; " if verify_hours else "verify off; ")
        + ("serving gate.sock" if serving else "not serving (--no-serve)")
        + (f"; gateway on {listen}" if listen is not None else "")
        + (f"; console on {config.console.listen}" if console is not None else "")
    )


def _scheduler(home_runtime: Runtime) -> tuple[Any, bool]:
    """The scheduler with every job added, not started; and whether it polls.

    Raises:
        ConfigError: the configuration is invalid.
    """
    config = home_runtime.config
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    try:
        snapshot_trigger = CronTrigger.from_crontab(config.snapshot_cron, timezone=dt.UTC)
    except ValueError as exc:
        raise ConfigError(f"snapshot.cron: {exc}") from exc

    def fresh_runtime() -> Runtime:
        # A fresh runtime per run: config and keys are re-read, so an operator's
        # edit or a key rotation takes effect without a restart.
        return Runtime(home_runtime.home, dict(home_runtime.environ))

    scheduler = BackgroundScheduler(
        timezone=dt.UTC,
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600},
    )
    now = dt.datetime.now(dt.UTC)  # noqa: TID251 - the scheduler runs on the real clock
    interval = IntervalTrigger(seconds=float(config.interval_hours) * 3600, timezone=dt.UTC)
    # Without an observer there is no bill to reconcile with (`init --billing none`):
    # no job, rather than a "billing unreachable" reconcile every interval.
    reconciling = config.observer_command is not None
    for provider in config.reconcile_providers if reconciling else ():
        scheduler.add_job(
            reconcile_job, interval, args=[fresh_runtime, provider],
            id=f"reconcile-{provider}", next_run_time=now,
        )  # fmt: skip
    polling = config.poll_seconds > 0 and config.observer_command is not None
    if polling:
        # One job per provider; max_instances=1 skips a poll while the last one
        # still runs, and a poll a busy scheduler could not start within its own
        # interval is dropped: the next one is due anyway.
        every = IntervalTrigger(seconds=config.poll_seconds, timezone=dt.UTC)
        for provider in config.reconcile_providers:
            scheduler.add_job(
                poll_job, every, args=[fresh_runtime, provider], id=f"poll-{provider}",
                misfire_grace_time=config.poll_seconds,
            )  # fmt: skip
    snapshot_kwargs: dict[str, Any] = {}
    if _snapshot_missed(home_runtime, now):
        snapshot_kwargs["next_run_time"] = now
    scheduler.add_job(
        snapshot_job, snapshot_trigger, args=[fresh_runtime], id="snapshot", **snapshot_kwargs
    )
    if config.alert_rules:
        # Alerts follow the chain here, never on the per-call path (a verdict
        # never waits for a webhook).
        scheduler.add_job(
            alerts_job, IntervalTrigger(seconds=config.alert_check_seconds, timezone=dt.UTC),
            args=[fresh_runtime], id="alerts", next_run_time=now,
        )  # fmt: skip
    if config.verify_interval_hours > 0:
        every_verify = IntervalTrigger(
            seconds=float(config.verify_interval_hours) * 3600, timezone=dt.UTC
        )
        scheduler.add_job(VerifyJob(fresh_runtime), every_verify, id="verify", next_run_time=now)
    # The rollups kept current between reports, whoever wrote the entries (a
    # one-shot `ledger record` folds nothing itself): the first run builds them
    # on a home that has none, in the background rather than in a first report.
    from ledger.services.views.rollup_follower import RollupFollower

    rollups = RollupFollower(fresh_runtime, log_line)
    scheduler.add_job(
        rollups.fold_once, IntervalTrigger(seconds=_ROLLUP_SECONDS, timezone=dt.UTC),
        id="rollups", next_run_time=now, misfire_grace_time=_ROLLUP_SECONDS,
    )  # fmt: skip
    _add_fleet_jobs(scheduler, config.store_url, fresh_runtime, now)
    return scheduler, polling


def _add_fleet_jobs(
    scheduler: Any, store_url: str | None, runtime_factory: Callable[[], Runtime], now: dt.datetime
) -> None:
    """On a fleet host, seal spooled records within ``_SPOOL_SECONDS`` (SPEC §8).

    The jobs share one database connection, kept between runs and reopened
    with backoff when it breaks.
    """
    if store_url is None:
        return
    from apscheduler.triggers.interval import IntervalTrigger

    scheduler.add_job(
        spool_job, IntervalTrigger(seconds=_SPOOL_SECONDS, timezone=dt.UTC),
        args=[runtime_factory], id="spool", next_run_time=now,
    )  # fmt: skip


def _shutdown(scheduler: Any, store_url: str | None) -> None:
    """Stop the scheduler; on a fleet host, close the database connection too.

    A job already running is waited for while the stop handlers are still in
    place (every job's waits are bounded: observer and lock timeouts), so a
    second signal cannot cut its append short, and "stopped" means stopped.
    """
    scheduler.shutdown(wait=True)
    if store_url is not None:
        from ledger.edges.postgres.connection import close_all

        close_all()


def _snapshot_missed(runtime: Runtime, now: dt.datetime) -> bool:
    """Whether no snapshot was taken in the last day (then one is taken at start)."""
    directory = runtime.snapshots_dir
    if not directory.is_dir():
        return runtime.chain.exists()
    newest = max((p.stat().st_mtime for p in directory.iterdir()), default=None)
    return newest is None or now.timestamp() - newest > _DAY_SECONDS
