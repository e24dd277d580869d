"""`python -m eqsat` is the `eqsat` command."""

from eqsat.cli import run_command

run_command()
