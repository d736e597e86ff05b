"""rlrun's Hydra sweepers, found by Hydra's plugin discovery in the ``hydra_plugins`` namespace.

``rlrun_basic``: Hydra's basic sweeper that runs every job and then lists all failures.
``rlrun_optuna``: hyperparameter search on optuna's ask/tell API (``hparams_search=ppo_optuna``).
"""
