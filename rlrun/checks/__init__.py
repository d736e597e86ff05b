"""The rules a run is checked against before anything heavy is built, a module per concern
(ranges, packages, envs, collectors, buffers, policies, algorithms, offline data, Ray learners,
``_target_``s). ``rlrun/validation.py`` runs them in order; an algorithm's own rules come from
its declaration."""
