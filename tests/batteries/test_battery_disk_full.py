"""Battery: disk full. Appends and verdicts on a nearly full filesystem fail cleanly.

A small filesystem is mounted (tmpfs, and a loopback ext4 image when ``mkfs.ext4`` and
loop devices are available; the battery is skipped, with the reason, when nothing can
be mounted), a home is put on it and the rest is filled. Then:

* ``ledger record`` is called until the disk is full: the failing call exits 74 with
  one ``ledger: `` line, and leaves no torn entry (the chain ends in a whole line and
  verifies);
* a little space is freed and ``ledger verdict`` is called until the disk is full
  again: the failing call is ``halt-uncertainty`` / ``counter_inconsistent``, exit 1,
  with one ``ledger: verdict not recorded`` line, and again no torn entry;
* a failed call must not have sealed its entry anyway (the caller was told it failed
  and will retry: a record sealed twice counts the spend twice);
* after the space is freed the chain verifies, and verdict and record work again.
"""

import contextlib
import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.core.chain import verify_lines
from ledger.edges.files.keyfiles import KeyDir
from tests.batteries.common import BASE, iso, sized, summary
from tests.conftest import Result

MAX_CALLS = sized(400, 2000)
ROUNDS = sized(2, 6)
ENV = {"LEDGER_BILLING_STALE_HALT_PCT": "100", "LEDGER_NOW": iso(BASE)}


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    except OSError as exc:  # no such program
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


@contextlib.contextmanager
def small_fs(kind: str, where: Path) -> Iterator[Path | str]:
    """Mount a small filesystem at ``where``; yields it, or the reason it cannot be made."""
    where.mkdir(parents=True, exist_ok=True)
    image = where.with_suffix(".img")
    if kind == "tmpfs":
        done = _run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(where)])
    else:
        if shutil.which("mkfs.ext4") is None:
            yield "mkfs.ext4 not installed"
            return
        with image.open("wb") as handle:
            handle.truncate(4 << 20)
        made = _run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)])
        if made.returncode != 0:
            yield f"mkfs.ext4 failed: {made.stderr.strip()[:200]}"
            return
        done = _run(["mount", "-o", "loop", str(image), str(where)])
    if done.returncode != 0:
        yield f"mount {kind} not permitted: {done.stderr.strip()[:200]}"
        image.unlink(missing_ok=True)
        return
    try:
        yield where
    finally:
        if _run(["umount", str(where)]).returncode != 0:
            _run(["umount", "-l", str(where)])
        image.unlink(missing_ok=True)


def fill(directory: Path) -> Path:
    """Write a filler file until the filesystem reports ENOSPC."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    block = b"\0" * 4096
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
    return filler


def free(filler: Path, kib: int) -> None:
    """Give back ``kib`` KiB of the filler."""
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - kib * 1024))


def one_error_line(result: Result) -> bool:
    lines = result.stderr.splitlines()
    return len(lines) == 1 and lines[0].startswith("ledger: ") and "Traceback" not in result.stderr


def whole_and_verifying(home: Path) -> bool:
    data = (home / "events.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    return data.endswith(b"\n") and verify_lines(lines, KeyDir(home).load_trust()).ok


def exercise(run, mount: Path, figures: dict[str, int], failures: list[str]) -> None:
    home = mount / "home"
    result = run(["--home", str(home), "init", "--daily-cap-usd", "1000000"])
    assert result.code == 0, result
    for _ in range(3):
        assert (
            run(["--home", str(home), "record", "0.5", "--provider", "openai"], env=ENV).code == 0
        )
    filler = fill(mount)
    chain = home / "events.jsonl"
    for round_number in range(ROUNDS):
        for command in (["record", "0.01", "--provider", "openai"], ["verdict", "0.01"]):
            free(filler, 12)
            name = command[0]
            seen = 0
            for _call in range(MAX_CALLS):
                before = chain.read_bytes()
                result = run(["--home", str(home), *command], env=ENV)
                after = chain.read_bytes()
                document = json.loads(result.stdout) if result.stdout.strip() else {}
                failed = result.code != 0 if name == "record" else result.code == 1
                if not failed:
                    figures[f"{name} ok"] += 1
                    if not after.startswith(before) or after == before:
                        failures.append(f"round {round_number}: {name} ok but chain not appended")
                    continue
                seen += 1
                figures[f"{name} ENOSPC"] += 1
                if name == "record":
                    if result.code != 74 or not one_error_line(result):
                        failures.append(f"record on a full disk: {result}")
                elif not (
                    document.get("verdict") == "halt-uncertainty"
                    and document.get("uncertainty_reason") == "counter_inconsistent"
                    and document.get("verdict_ref") is None
                    and one_error_line(result)
                    and "verdict not recorded" in result.stderr
                ):
                    failures.append(f"verdict on a full disk: {result}")
                if after == before:
                    figures["append refused, chain unchanged"] += 1
                else:
                    figures["failed call sealed anyway"] += 1
                    failures.append(
                        f"{name} exited {result.code} ({result.stderr.strip()[-90:]}) "
                        f"but its entry was appended ({len(after) - len(before)} bytes)"
                    )
                if not after.endswith(b"\n"):
                    figures["torn"] += 1
                    halt = run(["--home", str(home), "verdict", "0.01"], env=ENV)
                    if "counter_inconsistent" not in halt.stdout:
                        failures.append(f"torn tail left and the gate did not halt: {halt}")
                elif not whole_and_verifying(home):
                    failures.append(f"{name} on a full disk left a chain that does not verify")
                # keep going until the append itself is refused (or give up after a few)
                if after == before or seen >= 8:
                    break
            else:
                failures.append(f"{name}: the disk never filled in {MAX_CALLS} calls")
    filler.unlink()
    verify = run(["--home", str(home), "verify-chain"])
    verdict = run(["--home", str(home), "verdict", "0.01"], env=ENV)
    record = run(["--home", str(home), "record", "0.01", "--provider", "openai"], env=ENV)
    again = run(["--home", str(home), "verify-chain"])
    healed = (
        verify.code == 0 and verdict.code == 0 and record.code == 0 and again.code == 0
        and json.loads(verdict.stdout)["uncertainty_reason"] is None
    )  # fmt: skip
    figures["recovered after freeing space"] += healed
    if not healed:
        failures.append(f"after freeing space: {verify}, {verdict}, {record}, {again}")


@pytest.mark.timeout(sized(300, 1800))
def test_disk_full_battery(run_inproc, tmp_path, capsys):
    from collections import Counter

    figures: Counter[str] = Counter()
    failures: list[str] = []
    mounted: list[str] = []
    reasons: list[str] = []
    for kind in ("tmpfs", "ext4"):
        with small_fs(kind, tmp_path / f"fs-{kind}") as mount:
            if isinstance(mount, str):
                reasons.append(f"{kind}: {mount}")
                continue
            mounted.append(kind)
            before = len(failures)
            exercise(run_inproc, mount, figures, failures)
            failures[before:] = [f"[{kind}] {failure}" for failure in failures[before:]]
    if not mounted:
        pytest.skip("no small filesystem could be mounted: " + "; ".join(reasons))
    checks = figures["record ENOSPC"] + figures["verdict ENOSPC"] + len(mounted)
    summary(
        capsys, "disk-full", checks - len(failures), len(failures),
        f"filesystems {'+'.join(mounted)}"
        + (f" (skipped {'; '.join(reasons)})" if reasons else "")
        + f"; records ok {figures['record ok']}, record ENOSPC {figures['record ENOSPC']}; "
        f"verdicts ok {figures['verdict ok']}, verdict ENOSPC {figures['verdict ENOSPC']}; "
        f"torn entries {figures['torn']}; appends refused with the chain unchanged "
        f"{figures['append refused, chain unchanged']}, failed calls sealed anyway "
        f"{figures['failed call sealed anyway']}; healed after freeing "
        f"{figures['recovered after freeing space']}/{len(mounted)}",
    )  # fmt: skip
    assert not failures, "\n".join(failures[:10])
