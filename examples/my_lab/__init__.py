"""A user's own package: rlrun finds it by ``_target_`` on PYTHONPATH, never by editing rlrun.

``policies``: a policy factory (``policy._target_``; docs/guides/collectors.md).
``algos``: algorithms of its own, one module each (``algo._target_``; docs/guides/algorithms.md).
``masked_env``: a gymnasium env with an action mask (``env.imports``; docs/guides/action-masks.md).
"""
