"""`python -m attnmatch.cli`: the command line, as `attnmatch`."""

from attnmatch.cli import main

main()
