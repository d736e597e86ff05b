"""Baseline for ``bench/``: BenchMARL's MAPPO, IPPO, MADDPG or IDDPG on a VMAS task, beside rlrun.

Run it with BenchMARL's own interpreter, not rlrun's: BenchMARL 1.5.2 needs torchrl<0.12 while
rlrun uses torchrl 0.14 (see ``benchmarl_requirements.txt`` beside this file)::

    /work/benchmarl-venv/bin/python bench/baselines/benchmarl_vmas.py --algorithm mappo \
        --task navigation --frames 12000 --out /tmp/bm.json

Only the command-line flags are set; every other value is BenchMARL's default from
``conf/experiment/base_experiment.yaml``, ``conf/algorithm/<algorithm>.yaml``,
``conf/task/vmas/<task>.yaml`` and ``conf/model/layers/mlp.yaml`` (used for actor and critic),
except what would make its frames/s incomparable: all devices are the CPU, no logger, no
evaluation, no rendering, no checkpoints, no marl-eval JSON.

How BenchMARL reads the flags (from benchmarl 1.5.2's source):

- a frame is one step of one VMAS sub-env (all agents together), not one agent-step;
  ``--frames`` is ``max_n_frames``; the run does ceil(frames / frames-per-batch) iterations;
- ``--epochs`` is ``on_policy_n_minibatch_iters``: per iteration, that many passes, each of
  ceil(frames-per-batch / minibatch-size) minibatches drawn without replacement, so
  epochs * ceil(frames-per-batch / minibatch-size) Adam steps per iteration;
- actor and critic have separate Adam optimisers (``lr``, eps ``adam_eps``=1e-6), each with its
  own grad-norm clip at ``clip_grad_val``=5; GAE (gamma 0.99, lambda 0.9) is computed once per
  batch with the pre-update critic; advantages are *not* normalised; no value clipping; l2
  critic loss with coefficient 1; entropy coefficient 0; TanhNormal continuous actions;
- off-policy (MADDPG, IDDPG): per iteration ``--frames-per-batch`` frames from ``--n-envs``
  envs (``off_policy_collected_frames_per_batch``, ``off_policy_n_envs_per_worker``), then
  ``--updates`` Adam steps (``off_policy_n_optimizer_steps``) on ``--train-batch`` frames drawn
  from a buffer of ``--memory`` frames; exploration noise from ``exploration_eps_init`` (0.8)
  to ``--sigma-end`` over ``--anneal-frames`` frames (``AdditiveGaussianModule.step`` with each
  batch's frames), soft targets with ``polyak_tau`` 0.005, no random first frames;
- VMAS's ``max_steps`` horizon sets ``terminated`` (torchrl's VmasEnv has no ``truncated``), so
  GAE does not bootstrap at the time limit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import torch
from benchmarl.algorithms import IddpgConfig, IppoConfig, MaddpgConfig, MappoConfig
from benchmarl.environments import VmasTask
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.experiment.callback import Callback
from benchmarl.models.mlp import MlpConfig

ALGORITHMS = {
    "mappo": MappoConfig,
    "ippo": IppoConfig,
    "maddpg": MaddpgConfig,
    "iddpg": IddpgConfig,
}
TASKS = {"navigation": VmasTask.NAVIGATION, "balance": VmasTask.BALANCE}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", choices=sorted(ALGORITHMS), default="mappo")
    p.add_argument("--task", choices=sorted(TASKS), default="navigation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--frames", type=int, default=12_000, help="max_n_frames")
    p.add_argument("--frames-per-batch", type=int, default=6000)
    p.add_argument("--n-envs", type=int, default=60, help="on/off_policy_n_envs_per_worker")
    p.add_argument("--epochs", type=int, default=45, help="on_policy_n_minibatch_iters")
    p.add_argument("--minibatch-size", type=int, default=400)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--hidden", default="256,256", help="MLP num_cells, comma-separated")
    p.add_argument("--updates", type=int, default=1000, help="off_policy_n_optimizer_steps")
    p.add_argument("--train-batch", type=int, default=128, help="off_policy_train_batch_size")
    p.add_argument("--memory", type=int, default=1_000_000, help="off_policy_memory_size")
    p.add_argument("--sigma-end", type=float, default=0.01, help="exploration_eps_end")
    p.add_argument("--anneal-frames", type=int, help="exploration_anneal_frames (default: 1/3)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads, as rlrun's trainer.num_threads (default 1); 0: torch's own",
    )
    p.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    return p.parse_args()


class ReturnRecorder(Callback):
    """Records BenchMARL's own per-iteration training return, frame count and phase times.

    ``on_batch_collected`` runs right after ``Logger.log_collection``, which sets
    ``experiment.mean_return``: for each group it takes each sub-env's ``episode_reward`` (the
    ``RewardSum`` transform's running sum) at the steps where the global ``("next", "done")`` is
    set, averages it over the group's agents, then averages over those finished episodes
    (``collection/<group>/reward/episode_reward_mean``), and finally over groups. VMAS tasks have
    the single group ``agents``, so this equals ``collection/agents/reward/episode_reward_mean``.
    It is NaN when no episode finished in the batch.
    """

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[int] = []
        self.returns: list[float | None] = []
        self.collection_s = 0.0
        self.training_s = 0.0
        self._mark = time.perf_counter()

    def start(self) -> None:
        self._mark = time.perf_counter()

    def on_batch_collected(self, batch) -> None:
        now = time.perf_counter()
        self.collection_s += now - self._mark
        self._mark = now
        ret = float(self.experiment.mean_return)
        self.frames.append(int(self.experiment.total_frames))
        self.returns.append(None if math.isnan(ret) else ret)

    def on_train_end(self, training_td, group: str) -> None:
        now = time.perf_counter()
        self.training_s += now - self._mark
        self._mark = now


def jsonable(obj: Any) -> Any:
    """Turns config dataclasses (whose fields hold classes such as ``torch.nn.Tanh``) into JSON."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    return str(obj)


def main() -> None:
    args = parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    hidden = [int(h) for h in args.hidden.split(",") if h]

    config = ExperimentConfig.get_from_yaml()
    config.sampling_device = config.train_device = config.buffer_device = "cpu"
    config.max_n_frames = args.frames
    config.max_n_iters = None
    config.on_policy_collected_frames_per_batch = args.frames_per_batch
    config.on_policy_n_envs_per_worker = args.n_envs
    config.on_policy_n_minibatch_iters = args.epochs
    config.on_policy_minibatch_size = args.minibatch_size
    config.off_policy_collected_frames_per_batch = args.frames_per_batch
    config.off_policy_n_envs_per_worker = args.n_envs
    config.off_policy_n_optimizer_steps = args.updates
    config.off_policy_train_batch_size = args.train_batch
    config.off_policy_memory_size = args.memory
    config.exploration_eps_end = args.sigma_end
    config.exploration_anneal_frames = args.anneal_frames
    config.lr = args.lr
    # Comparable frames/s: BenchMARL skips evaluation when there is neither a logger nor the
    # marl-eval JSON, and log_training's per-step .item() calls only run with a logger.
    config.loggers = []
    config.create_json = False
    config.evaluation = False
    config.render = False
    config.checkpoint_interval = 0
    config.checkpoint_at_end = False

    algorithm_config = ALGORITHMS[args.algorithm].get_from_yaml()
    task = TASKS[args.task].get_from_yaml()
    model_config = MlpConfig.get_from_yaml()
    model_config.num_cells = hidden

    recorder = ReturnRecorder()
    with tempfile.TemporaryDirectory(prefix="benchmarl_") as save_folder:
        # Experiment writes config.pkl into save_folder/<name>/; nothing else with no logger.
        config.save_folder = save_folder
        t0 = time.perf_counter()
        experiment = Experiment(
            task=task,
            algorithm_config=algorithm_config,
            model_config=model_config,
            seed=args.seed,
            config=config,
            callbacks=[recorder],
        )
        setup_s = time.perf_counter() - t0
        recorder.start()
        t1 = time.perf_counter()
        experiment.run()
        wall = time.perf_counter() - t1

    total_frames = int(experiment.total_frames)
    result = {
        "algorithm": args.algorithm,
        "task": args.task,
        "seed": args.seed,
        "frames": recorder.frames,
        "train_return": recorder.returns,
        "wall_time_s": wall,
        "fps": total_frames / wall,
        "setup_time_s": setup_s,
        "collection_time_s": recorder.collection_s,
        "training_time_s": recorder.training_s,
        "benchmarl_total_time_s": float(experiment.total_time),
        "iterations": int(experiment.n_iters_performed),
        "total_frames": total_frames,
        "group_map": {k: list(v) for k, v in experiment.group_map.items()},
        "versions": {
            p: version(p) for p in ("benchmarl", "torchrl", "tensordict", "torch", "vmas")
        },
        "hyperparameters": {
            "cli": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "torch_num_threads": torch.get_num_threads(),
            "continuous_actions": bool(experiment.continuous_actions),
            "experiment": jsonable(config),
            "algorithm": jsonable(algorithm_config),
            "model": jsonable(model_config),
            "critic_model": jsonable(experiment.critic_model_config),
            "task": jsonable(task.config),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("frames", "train_return", "wall_time_s", "fps")}))


if __name__ == "__main__":
    main()
