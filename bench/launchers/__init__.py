"""Where the runs of a sweep execute.

* ``inline`` (default): one after another inside the ``bench`` process;
* ``local``: a pool of worker processes on this machine, one run per process, on CPU slots or
  GPU slots that honour ``CUDA_VISIBLE_DEVICES`` (several runs per GPU with
  ``--jobs-per-gpu``);
* ``slurm``: one SLURM job per run (job arrays, through submitit), each a worker process;
* any launcher a plugin registers (:func:`register_launcher`, README "Adding a launcher").

They share one loop (:mod:`.scheduler`) that decides, retries, stops on the first failure
when asked, and prints the live summary; and one worker (:mod:`.worker`, started and watched
through :mod:`.process`) that runs a single run in its own process. Each launcher declares its
own flags and builds itself from the command line (:mod:`.factories`). ``submitit`` is
imported only by the ``slurm`` launcher.
"""

from .factories import LAUNCHERS, Launchable, LaunchContext, register_launcher
from .scheduler import Ended, Launcher, LiveSummary, Sweep, Task, schedule

__all__ = [
    "LAUNCHERS",
    "Ended",
    "LaunchContext",
    "Launchable",
    "Launcher",
    "LiveSummary",
    "Sweep",
    "Task",
    "register_launcher",
    "schedule",
]
