"""The console script's subcommands, a module each (``rlrun eval``, ``export``, ``record``,
``report``, ``check``, ``reproduce``) and what they share: a trained run rebuilt from its folder
(``loading.py``), references and statistics. ``rlrun/cli.py`` only dispatches to them."""
