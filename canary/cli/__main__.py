"""`python -m canary.cli`: the same as the `canary` command."""

from canary.cli import main

main()
