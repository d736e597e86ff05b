"""A user's own package: rlrun finds it by ``_target_`` on PYTHONPATH, never by editing rlrun."""
