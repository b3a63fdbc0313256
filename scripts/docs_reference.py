"""The reference pages' generated parts, from the code that knows them.

An mkdocs hook (``mkdocs.yml``: ``hooks: [scripts/docs_reference.py]``) that
replaces two markers in the reference pages at build time:

- ``<!-- ledger:commands -->``: every command's ``--help``, as the parsers
  print it (the per-call commands' argparse parsers and the typer app);
- ``<!-- ledger:config -->``: every ``ledger.toml`` key with its environment
  variable, default (``ledger.core.config.Config``) and meaning;
- ``<!-- ledger:runbook -->``: ``deploy/RUNBOOK.md``, the runbook the package
  ships, so the site and the installed copy are one text.

So the reference cannot drift from the program: a new command or option
appears by itself, and a config key without a meaning here fails the docs test.
"""

import argparse
import os
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

os.environ.setdefault("COLUMNS", "100")  # help wrapped as in a normal terminal
os.environ.setdefault("TYPER_USE_RICH", "0")

# What each key means, for people. The keys and defaults come from the code.
MEANINGS = {
    "usd.providers": "The providers this home expects; a verdict naming a provider in none of "
    "this list, `usd.provider_caps` or the price table is refused (exit 2).",
    "chain.verify_interval_hours": "`ledger daemon` verifies the whole chain this often (and at "
    "start); a BROKEN finding halts every verdict until `ledger recover`. 0: off.",
    "usd.daily_cap": "Aggregate cap in USD per budget day; `verdict` needs it.",
    "usd.provider_caps": "Per-provider caps in USD (`{openai = 5}`), checked together with the "
    "aggregate cap.",
    "usd.warn_pct": "`warn-90` at or above this projected percentage of a cap.",
    "usd.reservation_ttl_seconds": "An admitted call's reservation expires after this long "
    "unless a `record` settles it.",
    "usd.day_timezone": "IANA zone where the budget day runs from midnight to midnight.",
    "billing.freshness_seconds": "A billing reading fetched this recently is fresh.",
    "billing.stale_halt_pct": "Usage percentage above which stale or lagging billing halts; "
    "without an observer every verdict above it halts `billing_stale`. 100 (written by "
    "`ledger init --billing none`): ledger's own records only, the caps alone decide.",
    "billing.stale_seconds": "No successful reading for this long is `billing_stale`.",
    "billing.provider_lag_seconds": "A bill this much older than its fetch is `provider_lag`.",
    "billing.clock_tolerance_seconds": "Clock differences beyond this are `clock_drift`.",
    "billing.poll_seconds": "The daemon reads each reconciled provider's bill this often (0: off).",
    "observer.command": "The usage observer's argv (no shell); the provider id is appended.",
    "observer.timeout_seconds": "The observer is killed after this long (counts as unreachable).",
    "observer.env": "Environment variables passed to the observer besides PATH, HOME, LANG, "
    "`ANTHROPIC_*`, `OPENAI_*`, `*_ADMIN_KEY` and `LEDGER_OBSERVER_*` (a proxy, a CA bundle).",
    "reconcile.interval_hours": "The daemon reconciles counter and bill this often.",
    "reconcile.drift_threshold_pct": "Drift above this blocks (`counter_drift`).",
    "reconcile.providers": "Scopes the daemon reconciles and polls; `aggregate` is all providers.",
    "snapshot.cron": "When the daemon snapshots the chain (5-field cron, UTC).",
    "snapshot.keep_days": "Snapshots older than this are pruned.",
    "chain.lock_timeout_seconds": "Waiting longer than this for the chain lock exits 75.",
    "chain.idempotency_days": "Idempotency keys (`record --idempotency-key`) older than this "
    "many days leave the fast index; a retry with one is still found, checked in the chain "
    "(a little slower), so a key is honoured forever whatever this is.",
    "chain.segment_entries": "The open segment (`events.jsonl`) is sealed into "
    "`segments/` once it holds this many entries (an integer ≥ 1); see the chain's Segments.",
    "chain.segment_days": "The open segment is also sealed once its first entry is this many "
    "days older than its newest; 0: no age limit.",
    "store.url": "A PostgreSQL URI for a fleet's shared chain; unset: the file store in the home.",
    "store.schema": "The PostgreSQL schema the fleet's tables live in.",
}


# The width the help is laid out for: it fits the page's text column, so a
# help block never runs out of it (the style wraps what still would).
HELP_WIDTH = 78


def command_helps() -> Iterator[tuple[str, str]]:
    """Every command line's words and its ``--help`` text, per-call commands first."""
    os.environ["COLUMNS"] = str(HELP_WIDTH)  # argparse lays its help out for the terminal
    from ledger.cli import FAST_COMMANDS
    from ledger.cli.operator.app import command_tree
    from ledger.cli.percall.parser import build_parser

    yield from _argparse_helps(build_parser(), ("ledger",))
    root = command_tree()
    yield from _click_helps(root, None, "ledger", FAST_COMMANDS)


def _argparse_helps(
    parser: argparse.ArgumentParser, words: tuple[str, ...]
) -> Iterator[tuple[str, str]]:
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                yield " ".join((*words, name)), sub.format_help()
                yield from _argparse_helps(sub, (*words, name))
    family = parser.get_default("family_parser")
    if len(words) > 1 and family is not None:
        yield from _argparse_helps(family(), words)


def _click_helps(
    command: Any, parent: Any, name: str, skip: frozenset[str]
) -> Iterator[tuple[str, str]]:
    try:  # typer ≥ 0.28 vendors click as typer._click
        from typer._click import Context
    except ImportError:  # older typer uses click itself
        from click import Context

    context = Context(
        command, info_name=name, parent=parent, terminal_width=HELP_WIDTH,
        max_content_width=HELP_WIDTH,
    )  # fmt: skip
    if parent is not None:
        yield context.command_path, command.get_help(context)
    for sub_name, sub in sorted(getattr(command, "commands", {}).items()):
        if parent is None and sub_name in skip:
            continue  # the per-call commands' help is argparse's, above
        yield from _click_helps(sub, context, sub_name, skip)


def _default_text(value: Any) -> str:
    if value is None or value == {}:
        return "none"
    if isinstance(value, Fraction):
        text = str(value.numerator) if value.denominator == 1 else str(float(value))
    elif isinstance(value, tuple):
        text = "[" + ", ".join(f'"{part}"' for part in value) + "]"
    elif isinstance(value, str):
        text = f'"{value}"'
    else:
        text = str(value)
    return f"`{text}`"


def config_rows() -> Iterator[tuple[str, str, str, str]]:
    """Every config key: name, environment variable, default, meaning."""
    from ledger.core import config

    defaults = config.Config._field_defaults
    for section, keys in config._SCHEMA.items():  # noqa: SLF001 - the key table itself
        for key in keys:
            name = f"{section}.{key}"
            default = defaults[config._FIELD_FOR[section, key]]  # noqa: SLF001
            if name == "usd.daily_cap":
                default_text = "none (required by `verdict`)"
            elif name == "store.url":
                default_text = "none (the file store in the home)"
            else:
                default_text = _default_text(default)
            variable = config.env_name(section, key)
            yield name, variable, default_text, MEANINGS.get(name, "")


def commands_markdown() -> str:
    """The commands reference: one section per command line, its help as printed."""
    parts = []
    for words, text in command_helps():
        parts += [f"### `{words}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(parts)


def config_markdown() -> str:
    """The config reference table."""
    lines = ["| key | environment | default | meaning |", "|---|---|---|---|"]
    lines += [
        f"| `{name}` | `{variable}` | {default} | {meaning} |"
        for name, variable, default, meaning in config_rows()
    ]
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Fill the markers of the reference pages (the mkdocs hook)."""
    if "<!-- ledger:commands -->" in markdown:
        markdown = markdown.replace("<!-- ledger:commands -->", commands_markdown())
    if "<!-- ledger:config -->" in markdown:
        markdown = markdown.replace("<!-- ledger:config -->", config_markdown())
    if "<!-- ledger:runbook -->" in markdown:
        markdown = markdown.replace("<!-- ledger:runbook -->", runbook_markdown())
    return markdown


_TABLE_CODE = re.compile(r"(<td><code>)([^<]*)(</code>)")


def on_page_content(html: str, **_: Any) -> str:
    """Let config keys in tables break after a dot or an underscore only (the mkdocs hook).

    The page's style keeps words whole; these are the places a long key such
    as ``reconcile.drift_threshold_pct`` may wrap in a narrow column.
    """

    def breakable(match: re.Match[str]) -> str:
        text = re.sub(r"([._])", r"\1<wbr>", match.group(2))
        return match.group(1) + text + match.group(3)

    return _TABLE_CODE.sub(breakable, html)


def runbook_markdown() -> str:
    """The shipped runbook without its title (the page has its own)."""
    text = (REPO / "deploy" / "RUNBOOK.md").read_text(encoding="utf-8")
    return text.split("\n", 1)[1] if text.startswith("# ") else text
