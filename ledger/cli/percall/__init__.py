"""The per-call commands: the ones an agent's hooks run before and after every call.

``verdict``, ``record``, ``usage``, ``hook``, ``tokens``, ``turns``, ``tools`` and
``time`` ask ``ledger serve`` first (``ledger.cli.client``, standard library
only, outside this package so a served call never loads it), and otherwise are
parsed by ``argparse`` (``parser``) and run in this process. This package never
imports typer or the operator commands.
"""
