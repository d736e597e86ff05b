"""Algorithms of the user's own, one module each, as rlrun's are (``rlrun/algorithms/``):
``algo._target_: my_lab.algos.<name>.ALGORITHM`` reaches one (docs/guides/algorithms.md)."""
