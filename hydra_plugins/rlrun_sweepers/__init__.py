"""rlrun's Hydra sweepers, found by Hydra's plugin discovery in the ``hydra_plugins`` namespace.

``rlrun_basic``: Hydra's basic sweeper that runs every job and then lists all failures.
``rlrun_optuna``: hyperparameter search on optuna's ask/tell API (``hparams_search=ppo_optuna``).
Launchers (rlrun/conf/hydra/launcher/): Hydra's basic, joblib and submitit launchers, each job in
a process of its own (job_process.py), and Hydra's Ray launcher (ray_launcher.py); with each, a
job killed by a signal is one failed job (failures.py).
"""

import warnings

# rlrun's presets rlrun/conf/hydra/launcher/joblib.yaml, hydra/sweeper/basic.yaml, ... share the
# plugins' names on purpose: the plugin's dataclass validates them. Hydra warns about that on every
# composition. Set here because this package is imported before any composition, in the main
# process (plugin discovery) and in launcher workers (which unpickle Hydra's plugin registry).
warnings.filterwarnings("ignore", message=r"\n'hydra/.*' is validated against ConfigStore")
