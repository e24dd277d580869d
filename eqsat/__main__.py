"""`python -m eqsat` is the `eqsat` command."""

from eqsat.ui.cli import run_command

run_command()
