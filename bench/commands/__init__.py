"""One module per `bench` sub-command, each with an ``add(subparsers)`` function."""

from . import (
    analyze,
    compare,
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
    compare,
    regress,
    reproduce,
    track,
    listing,
    data,
    analyze,
    viz,
    perf,
)
