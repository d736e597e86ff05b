"""The one door to the internals of TorchRL, tensordict and Hydra (its launcher plugins too).

rlrun needs a few things those libraries keep private: a Trainer's counters and its Ray
learners, a replay storage's tensors, Hydra's command-line parser and basic sweeper, a Hydra
job's raw outcome, and a patch or two. Each lives here, in one module per library
(``torchrl``, ``tensordict``, ``hydra``), as a small function or class whose docstring ends by
naming the private member, the version it was checked against and why the public API does not
serve. ``tests/test_compat.py`` checks each entry against the installed version, failing with
the entry's name when an upgrade changes what it relies on, and checks that no other module of
``rlrun`` or ``hydra_plugins/rlrun_sweepers`` uses a ``_private`` member of those libraries.

The rule: outside this package, only public names of TorchRL, tensordict and Hydra, plus the
methods they document for subclasses to define (an env's ``_reset``, ``_step``, ``_set_seed``;
a transform's ``_call``, ...). Where a public API does the job, it is used instead of an entry.

``cpython`` holds the private steps of Python's own that rlrun takes (the first steps of the
interpreter's exit, so that a finished command need not wait for its teardown; whether
multiprocessing is still starting a spawned worker).

This is rlrun's lowest layer: its modules import torch and those libraries, and nothing of rlrun
but ``rlrun.errors``. ``rlrun.compat.hydra`` stays light (Hydra only, no torch): the console
script reads the command line with it before torch is imported.
"""
