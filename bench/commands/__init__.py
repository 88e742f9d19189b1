"""One module per `bench` sub-command, each with an ``add(subparsers)`` function."""

from . import analyze, data, listing, report, run, status, viz

COMMANDS = (run, status, report, listing, data, analyze, viz)
