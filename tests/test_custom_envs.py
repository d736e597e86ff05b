"""Your own environments (issue #33): ``env.imports`` imports the modules that register their
gymnasium ids, in the console script's checks and in every process that makes envs."""

from __future__ import annotations

from pathlib import Path

from conftest import TINY, run_dirs, run_rlrun, summary

TESTS = str(Path(__file__).parent)  # holds rlrun_test_envs, a user's env package
CORRIDOR = ["+experiment=ppo", "env.id=RlrunCorridor-v0", *TINY]


def test_an_env_package_of_your_own_trains_in_spawned_env_workers(workdir) -> None:
    run_rlrun(*CORRIDOR, "env.imports=[rlrun_test_envs]", "env.parallel=true", "env.num_envs=2",
              "env.mp_start_method=spawn", cwd=workdir, env={"PYTHONPATH": TESTS})  # fmt: skip
    (run,) = run_dirs(workdir)
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 1024


def test_an_env_module_that_does_not_import_is_one_line(workdir) -> None:
    for imports, expected in [
        ("[rlrun_no_such_envs]", "env.imports: cannot import rlrun_no_such_envs: "),
        ("[]", "env.id=RlrunCorridor-v0 is not a registered gymnasium env."),
    ]:
        proc = run_rlrun(*CORRIDOR, f"env.imports={imports}", cwd=workdir, check=False,
                         env={"PYTHONPATH": TESTS})  # fmt: skip
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"rlrun: error: {expected}"), line
        assert "PYTHONPATH" in line or "env.imports=[" in line
    assert not (workdir / "outputs").exists()
