"""The estimate, pricing and credential findings, measured before and after in one run.

    PYTHONPATH=. python bench/bench_findings.py [--quick] [--old TREE] [--out DIR]

``--old`` is a checkout of the code before the fixes (default ``/work/wt/old``);
``after`` is this tree. One fake provider (``tests/fakes/provider.py``, billing
by the providers' documented rules in its ``bill`` scenario) serves both; each
case starts a home and a ``ledger proxy`` from each tree in turn
(``findings_sides``). Printed: one table, finding | before | after | goal, with
the date and the load average; a case a tree cannot run says ``n/a`` and why.

* A: bursts on a $1 cap (``findings_bursts``): one request's estimate and what
  the fake billed for the calls let through, as % of the cap; single requests
  (``findings_single``): a lone surrogate's status, Gemini's JSON-array stream's
  first byte, a chat stream's record, the estimate of requests with fields
  that count as the model's window;
* B: the record of audio, image and service-tier calls against genai-prices' list;
* C: which key reached the fake, what a gateway key may claim, counting
  (``findings_keys``);
* D: the share of the official SDKs' request fields the estimate classifies;
* E: the latency each gateway adds (p50, sequential, interleaved with direct).
"""

import argparse
import datetime as dt
import os
import statistics
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench_gateway import Floor, interleaved, one_call, settled, start_upstream
from common import REPO, out_dir
from findings_bursts import CAP_MICROS, bursts, run_burst
from findings_keys import PER_AGENT_FINDING, checks, per_agent, run_checks
from findings_sides import Fake, Side
from findings_single import UNDER_LIST, Place, singles

import ledger

Row = tuple[str, str, str, str]
BENCH_PRICE = '[prices."anthropic/claude-bench"]\ninput_per_mtok = 3\noutput_per_mtok = 15\n'


def burst_rows(sides: list[Side], root: Path, fake: Fake, problems: list[str]) -> list[Row]:
    rows = []
    for burst in bursts():
        cells = []
        for side in sides:
            cell, billed = run_burst(burst, side, root, fake)
            if side.name == "after" and billed > CAP_MICROS:
                problems.append(f"{burst.finding}: after billed {billed} micro-USD > the cap")
            cells.append(cell)
        rows.append((burst.finding, cells[0], cells[1], burst.goal))
    return rows


def single_rows(sides: list[Side], root: Path, fake: Fake, problems: list[str]) -> list[Row]:
    cells: dict[str, list[str]] = {}
    for side in sides:
        home = side.home(root, fake.url, "1000")
        side.ledger(home, "prices", "sync")
        with side.gateway(home) as gateway:
            place = Place(gateway.url, home, fake, side.name)
            for case in singles():
                cells.setdefault(case.finding, []).append(case.run(place))
    for finding, (_before, after) in cells.items():
        if UNDER_LIST in after:
            problems.append(f"{finding}: after {after}")
    return [(case.finding, *cells[case.finding], case.goal) for case in singles()]  # type: ignore[misc]


def key_rows(sides: list[Side], root: Path, fake: Fake) -> list[Row]:
    found = [run_checks(side, root, fake) for side in sides]
    rows: list[Row] = [(c.finding, found[0][c.finding], found[1][c.finding], c.goal)
                       for c in checks()]  # fmt: skip
    spent = [per_agent(side, root, fake) for side in sides]
    rows.append((PER_AGENT_FINDING, spent[0], spent[1], "≤ $0.05 (claims refused)"))
    return rows


def classified_row(old: Path) -> Row:
    """The SDKs' request fields the estimate's allowlist classifies (as its completeness test)."""
    from ledger.providers import anthropic, gemini, openai
    from tests.unit.providers import sdk_fields

    claude, chat, google = (sdk_fields.anthropic_fields(), sdk_fields.openai_fields(),
                            sdk_fields.gemini_fields())  # fmt: skip
    config = {**gemini.REQUEST_FIELDS, **gemini.GENERATION_CONFIG_FIELDS,
              **dict.fromkeys(gemini.CLIENT_ONLY_FIELDS, "never sent")}  # fmt: skip
    pairs = [
        (claude["fields"], anthropic.MESSAGES_FIELDS), (claude["blocks"], anthropic.BLOCK_TYPES),
        (claude["betas"], anthropic.BETAS),
        ({anthropic.tool_family(kind) for kind in claude["tools"]}, anthropic.TOOL_TYPES),
        (chat["chat fields"], openai.CHAT_FIELDS), (chat["chat parts"], openai.PART_TYPES),
        (chat["chat tools"], openai.TOOL_TYPES), (chat["responses fields"], openai.RESPONSES_FIELDS),
        (chat["responses items"], openai.ITEM_TYPES), (chat["responses parts"], openai.PART_TYPES),
        (chat["responses tools"], openai.TOOL_TYPES),
        ({gemini.camel(n) for n in google["config"]}, config),
        ({gemini.camel(n) for n in google["generation config"]}, gemini.GENERATION_CONFIG_FIELDS),
        ({gemini.camel(n) for n in google["content"]}, {"parts", "role"}),
        ({gemini.camel(n) for n in google["part"]}, gemini.PART_FIELDS),
        ({gemini.camel(n) for n in google["tool"]}, gemini.TOOL_FIELDS),
        ({gemini.camel(n) for n in google["declaration"]}, gemini.DECLARATION_FIELDS),
    ]  # fmt: skip
    total = sum(len(sent) for sent, _known in pairs)
    known = sum(len({name for name in sent if name in table}) for sent, table in pairs)
    before = "n/a (no allowlist: a field it did not read added nothing, A+ rows)"
    if "MESSAGES_FIELDS" in (old / "ledger" / "providers" / "anthropic.py").read_text():
        before = "n/a (its allowlist is not read by this bench)"
    after = f"{known}/{total} = {100 * known / total:.1f} %"
    return ("D SDK request fields classified", before, after, "100 %")


def latency_row(sides: list[Side], root: Path, upstream: str, sequential: int) -> Row:
    """Latency added p50: direct, the floor and both gateways measured interleaved."""
    with ExitStack() as stack:
        homes = [side.home(root, upstream, "1000000", BENCH_PRICE) for side in sides]
        gateways = [settled(stack.enter_context(side.gateway(home)))
                    for side, home in zip(sides, homes, strict=True)]  # fmt: skip
        floor = Floor(upstream)
        stack.callback(floor.stop)
        bases = [upstream, floor.url, *(gateway.url for gateway in gateways)]
        direct, floored, *through = interleaved(bases, sequential, one_call)
    base = statistics.median(direct)
    floor_added = statistics.median(floored) - base
    cells = [f"+{statistics.median(samples) - base:.2f} ms "
             f"({(statistics.median(samples) - base) / floor_added:.1f}x the floor's)"
             for samples in through]  # fmt: skip
    return (
        f"E latency added p50 ({sequential} calls each; floor +{floor_added:.2f} ms)",
        *cells,
        "≤ 2x the floor's",
    )  # type: ignore[return-value]


def print_table(rows: list[Row]) -> None:
    widths = [max(len(row[index]) for row in rows) for index in range(4)]
    header: Row = ("finding", "before", "after", "goal")
    widths = [max(width, len(name)) for width, name in zip(widths, header, strict=True)]
    for row in [header, tuple("-" * width for width in widths), *rows]:
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--old", default="/work/wt/old", help="the tree before the fixes")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    sides = [Side("before", Path(args.old).resolve()), Side("after", REPO)]
    if not Path(ledger.__file__).resolve().is_relative_to(REPO):
        raise SystemExit(
            f"bench_findings: run with PYTHONPATH={REPO} (ledger is {ledger.__file__})"
        )
    if not (sides[0].tree / "ledger" / "__main__.py").exists():
        raise SystemExit(f"bench_findings: {args.old} is not a checkout of ledger")
    root = Path(tempfile.mkdtemp(prefix="bench-findings-", dir=out_dir(args.out)))
    upstream, url = start_upstream()
    fake = Fake(url)
    problems: list[str] = []
    try:
        rows = burst_rows(sides, root, fake, problems)
        rows += single_rows(sides, root, fake, problems)
        rows += key_rows(sides, root, fake)
        rows.append(classified_row(sides[0].tree))
        rows.append(latency_row(sides, root, url, 200 if args.quick else 1000))
    finally:
        upstream.kill()
        upstream.wait()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"findings before ({args.old}) / after ({REPO}), {now}, load average {load}")
    print_table(rows)
    for problem in problems:
        print(f"PRODUCT BUG: {problem}")


if __name__ == "__main__":
    main()
