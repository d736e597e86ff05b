"""What a run is built from, one module per thing (``make_*``): envs, policies, collectors,
replay buffers and datasets, the update step and the learners, loggers, checkpoints, hooks,
evaluation, and the one device rule. ``rlrun/run.py`` puts them together."""
