"""Hooks from YAML: TorchRL built-ins by name, a user's class from outside the package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import TINY, csv_series, run_dirs, run_rlrun, summary

COUNTER = '''
class Counter:
    """Counts its calls; logs the count; keeps it across checkpoints."""

    def __init__(self, start: int = 0) -> None:
        self.count = start

    def __call__(self, batch):
        self.count += 1
        return {"my_lab/count": self.count}

    def state_dict(self):
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = state["count"]
'''

LEAVES_WORK = '''
import atexit
import threading
import time
from pathlib import Path


class LeavesWorkForTheEnd:
    """Leaves work for the process's end: a thread that is not a daemon, still writing when
    training ends, and an exit handler."""

    def __init__(self, folder: str) -> None:
        folder = Path(folder)
        threading.Thread(target=lambda: (time.sleep(3), (folder / "thread").touch())).start()
        atexit.register((folder / "atexit").touch)

    def __call__(self) -> None:
        pass
'''


def user_package(root: Path) -> dict[str, str]:
    """``my_lab.hooks.Counter`` in a folder outside rlrun, importable by the subprocess."""
    (root / "my_lab").mkdir()
    (root / "my_lab" / "__init__.py").write_text("")
    (root / "my_lab" / "hooks.py").write_text(COUNTER + LEAVES_WORK)
    return {"PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def test_builtin_and_user_hooks_run_and_their_state_survives_resume(workdir: Path) -> None:
    env = user_package(workdir)
    user_hook = ["+hooks.my_hook._target_=my_lab.hooks.Counter", "+hooks.my_hook.at=post_optim_log"]
    hooks = "hooks=[reward_normalizer,clear_cuda_cache,count_frames_log]"
    # the process waits for what the user's code left running and runs its exit handlers, as
    # any Python process does, before it ends (rlrun skips only the interpreter's teardown)
    leaves = ["+hooks.leaves._target_=my_lab.hooks.LeavesWorkForTheEnd",
              "+hooks.leaves.at=post_steps", f"+hooks.leaves.folder={workdir}"]  # fmt: skip
    run_rlrun("+experiment=ppo", *TINY, hooks, *user_hook, *leaves, cwd=workdir, env=env)
    assert (workdir / "thread").is_file() and (workdir / "atexit").is_file()
    (run_dir,) = run_dirs(workdir)
    (checkpoint,) = (run_dir / "checkpoints").glob("checkpoint-*")
    components = {p.name.split("-", 1)[1] for p in (checkpoint / "components").iterdir()}
    assert {"trainer_module.my_hook", "trainer_module.reward_normalizer"} <= components
    assert csv_series(run_dir, "n_frames") == [(512, 512.0), (1024, 1024.0)]  # count_frames_log
    # 4 minibatch steps per batch: the hook is called at each optimisation step
    assert csv_series(run_dir, "my_lab/count") == [(512, 1.0), (1024, 5.0)]

    run_rlrun(f"resume={run_dir}", "trainer.total_frames=2048", cwd=workdir, env=env)
    assert summary(run_dir)["frames"] == 2048
    # restored at 8 calls: the next logged values are 9 and 13, not 1 and 5 again
    assert csv_series(run_dir, "my_lab/count")[2:] == [(1536, 9.0), (2048, 13.0)]
    assert csv_series(run_dir, "n_frames")[2:] == [(1536, 1536.0), (2048, 2048.0)]


def test_unknown_hook_point_lists_the_valid_ones(workdir: Path) -> None:
    env = user_package(workdir)
    proc = run_rlrun(
        "+experiment=ppo",
        *TINY,
        "+hooks.my_hook._target_=my_lab.hooks.Counter",
        "+hooks.my_hook.at=post_optimm",
        cwd=workdir,
        env=env,
        check=False,
    )
    assert proc.returncode == 2
    assert "hooks.my_hook.at=post_optimm is not valid" in proc.stderr
    assert "post_optim_log" in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_hook_name_lists_the_builtins(workdir: Path) -> None:
    proc = run_rlrun(
        "+experiment=ppo", *TINY, "+hooks.reward_normaliser.decay=0.9", cwd=workdir, check=False
    )
    assert proc.returncode == 2
    assert "reward_normaliser is not a built-in hook" in proc.stderr
    assert "reward_normalizer" in proc.stderr and "_target_" in proc.stderr


def test_replay_buffer_hook_uses_the_replay_buffer_group(workdir: Path) -> None:
    rb = ["hooks=[replay_buffer]", "replay_buffer.storage=memmap", "replay_buffer.batch_size=64"]
    rb.append("replay_buffer.sampler=slice")  # reads the trajectory ids the collector then writes
    run_rlrun("+experiment=ppo", *TINY, *rb, cwd=workdir)
    run = run_dirs(workdir)[0]
    assert summary(run)["status"] == "completed"
    # The group's memmap storage, on disk, with the trajectory ids the slice sampler reads
    # (without them it would cut slices across env rows at "done" boundaries only).
    assert (run / "replay_buffer" / "collector" / "traj_ids.memmap").is_file()
    assert csv_series(run, "train/loss_objective")  # PPO trained on the buffer's samples
    dqn = ["+experiment=dqn", "trainer.total_frames=512", "hooks=[replay_buffer]"]
    proc = run_rlrun(*dqn, cwd=workdir, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "algo=dqn already trains from the replay buffer" in proc.stderr


@pytest.mark.parametrize(
    ("hooks", "reads"),
    [
        ([], False),
        (["hooks=[count_frames_log,clear_cuda_cache]"], False),
        (["hooks=[reward_normalizer]"], True),
        (["hooks=[batch_subsampler]"], True),
        (["+hooks.mine._target_=faulty_hooks.FailsToBuild", "+hooks.mine.at=post_steps"], False),
        (["+hooks.mine._target_=faulty_hooks.FailsToBuild", "+hooks.mine.at=post_loss"], True),
        (["+hooks.mine._target_=faulty_hooks.FailsToBuild"], True),  # registers itself
    ],
)
def test_which_hooks_see_each_replay_sample(hooks: list[str], reads: bool) -> None:
    """With such a hook an off-policy run keeps sampling in the Trainer's replay hook."""
    from conftest import compose

    from rlrun.builders.hook_entries import parse_hooks, reads_samples

    cfg = compose("+experiment=sac", *hooks)
    assert reads_samples(parse_hooks(cfg.hooks)) is reads
