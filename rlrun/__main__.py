"""``python -m rlrun``: the console script itself (``rlrun.cli.main``), sweeps included. The
guard keeps spawned worker processes, which import this module as ``__mp_main__``, from
starting a run of their own."""

from rlrun.cli import main

if __name__ == "__main__":
    main()
