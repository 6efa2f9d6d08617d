"""`python -m cbledger`: the same entry point as the `cbledger` script, for a checkout run
without installing it (a clone beside an installed copy runs its own code this way)."""

from cbledger.cli.entry import main

main()
