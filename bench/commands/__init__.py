"""One module per `bench` sub-command, each with an ``add(subparsers)`` function."""

from . import analyze, data, listing, perf, regress, report, run, status, viz

COMMANDS = (run, status, report, regress, listing, data, analyze, viz, perf)
