"""``hydra/launcher=joblib``: Hydra's joblib launcher (loky worker processes), each job in a
process of its own forked from its worker (job_process.py).

A job killed by a signal (the OOM killer, a segfault) is then one failed job while the others run
to their end. In the worker itself, its death broke loky's executor, which killed the other
workers with their jobs and ended the sweep with TerminatedWorkerError, later jobs not started.
"""

from hydra_plugins.rlrun_sweepers.job_process import PluginLauncher


class JoblibLauncher(PluginLauncher):
    PLUGIN = "hydra_plugins.hydra_joblib_launcher.joblib_launcher:JoblibLauncher"
