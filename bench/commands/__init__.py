"""One module per `bench` sub-command, each with an ``add(subparsers)`` function."""

from . import analyze, config, data, listing, perf, regress, report, run, status, tune, viz

COMMANDS = (run, tune, config, status, report, regress, listing, data, analyze, viz, perf)
