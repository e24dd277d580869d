"""The user's interface: the `eqsat` command and its subcommands.

- `cli`: argument parsing, one-line errors, exit codes
- `startup`: what the command imports late or never
- `info`, `explain`: `eqsat info` and `eqsat explain`

Layer rule: the top; nothing imports it.
"""
