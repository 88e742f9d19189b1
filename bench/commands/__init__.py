"""One module per `bench` sub-command, each with an ``add(subparsers)`` function."""

from . import (
    analyze,
    config,
    data,
    listing,
    perf,
    regress,
    report,
    reproduce,
    run,
    status,
    track,
    tune,
    viz,
)

COMMANDS = (
    run,
    tune,
    config,
    status,
    report,
    regress,
    reproduce,
    track,
    listing,
    data,
    analyze,
    viz,
    perf,
)
