"""``ledger COMMAND --help`` explains every argument and option and shows an example (SPEC §3).

The commands are enumerated from the parsers themselves (the argparse front door
with its lazily built families, and the typer app), so a new command or option
without help fails here.
"""

import argparse
import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from ledger.cli.arguments import FAST_COMMANDS
from ledger.cli.operator.app import app
from ledger.cli.percall.parser import build_parser

# Sections of --help whose entries are arguments and options: argparse's and click's.
ARGUMENT_SECTIONS = {"positional arguments", "options", "arguments"}
MIN_HELP_WORDS = 3


def walk_argparse(
    words: tuple[str, ...], parser: argparse.ArgumentParser
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every sub-command parser under ``parser``, with the words that reach it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*words, name), sub
                yield from walk_argparse((*words, name), sub)
    family = parser.get_default("family_parser")
    if words and family is not None:
        # A family's actions are parsed by a second parser built when it runs.
        yield from walk_argparse(words, family())


def walk_click(words: tuple[str, ...], command: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every typer command and group under ``command``; the per-call forwarders are skipped."""
    yield words, command
    for name, sub in getattr(command, "commands", {}).items():
        if not words and name in FAST_COMMANDS:
            continue  # `ledger verdict --help` is argparse's; covered below
        yield from walk_click((*words, name), sub)


PER_CALL = list(walk_argparse((), build_parser()))
OPERATOR = list(walk_click((), typer.main.get_command(app)))


def help_entries(text: str) -> dict[str, str]:
    """The argument and option entries of a --help text: invocation -> help text."""
    entries: dict[str, str] = {}
    section = None
    current = None
    for line in text.splitlines():
        if not line.strip():
            current = None
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            section = (
                line.rstrip().removesuffix(":").lower() if line.rstrip().endswith(":") else None
            )
            current = None
            continue
        if section not in ARGUMENT_SECTIONS:
            continue
        if indent == 2:
            name, *rest = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            current = name
            entries[name] = " ".join(rest).strip()
        elif current is not None:
            entries[current] = f"{entries[current]} {line.strip()}".strip()
    return entries


def assert_every_entry_explained(text: str) -> None:
    entries = help_entries(text)
    for name, explanation in entries.items():
        assert len(explanation.split()) >= MIN_HELP_WORDS, (
            f"{name!r} has no help sentence in:\n{text}"
        )
        assert explanation.lower() != name.lower()


def ids(words: tuple[str, ...]) -> str:
    return " ".join(words) or "ledger"


class TestPerCallHelp:
    def test_every_family_and_action_is_enumerated(self):
        """The walk reaches the lazily built families' actions, not just the top commands."""
        found = {words for words, _parser in PER_CALL}
        assert {(name,) for name in FAST_COMMANDS} <= found
        assert {("tokens", "record"), ("turns", "phase"), ("hook", "pre-tool-use")} <= found

    @pytest.mark.parametrize(("words", "parser"), PER_CALL, ids=[ids(w) for w, _ in PER_CALL])
    def test_help_explains_every_argument_and_shows_an_example(self, run_inproc, words, parser):
        """Exit 0; every shown argument and option has a sentence; an example follows."""
        result = run_inproc([*words, "--help"])
        assert result.code == 0, result.stderr
        assert result.stderr == ""
        assert "Example" in result.stdout
        assert parser.description, f"ledger {' '.join(words)} has no description"
        assert_every_entry_explained(result.stdout)
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:
                continue
            assert isinstance(action.help, str), f"{action.dest} of {words} has no help"
            assert len(action.help.split()) >= MIN_HELP_WORDS, (words, action.dest)

    @pytest.mark.parametrize("words", [("record",), ("tokens", "record")], ids=ids)
    def test_idempotency_key_is_explained(self, run_inproc, words):
        """Both record commands say what a repeated key does and what a key looks like."""
        text = " ".join(run_inproc([*words, "--help"]).stdout.split())
        assert "--idempotency-key K" in text
        assert "duplicate: true" in text
        assert "^[A-Za-z0-9._:-]{1,128}$" in text


class TestOperatorHelp:
    def test_every_operator_command_is_enumerated(self):
        """Groups and their commands are all reached."""
        found = {words for words, _command in OPERATOR}
        assert {(), ("init",), ("snapshot",), ("keys",), ("keys", "revoke")} <= found
        assert not {(name,) for name in FAST_COMMANDS} & found

    @pytest.mark.parametrize(("words", "command"), OPERATOR, ids=[ids(w) for w, _ in OPERATOR])
    def test_help_explains_every_argument_and_shows_an_example(self, run_inproc, words, command):
        """Exit 0; every shown argument and option has a sentence; the docstring ends in one."""
        result = run_inproc([*words, "--help"])
        assert result.code == 0, result.stderr
        assert "Example" in result.stdout
        assert_every_entry_explained(result.stdout)
        for param in command.params:
            explanation = getattr(param, "help", None)
            assert explanation, f"{param.name} of ledger {' '.join(words)} has no help"
            assert len(explanation.split()) >= MIN_HELP_WORDS, (words, param.name)
        assert command.help is not None
        assert command.help.strip().splitlines()[-1].lstrip().startswith("Example")
