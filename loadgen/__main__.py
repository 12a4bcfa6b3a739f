"""``python -m loadgen`` runs the command line."""

from loadgen.cli import main

main()
