"""Baseline for ``bench/``: PPO on CartPole-v1 as a plain hand-written TorchRL loop (no Trainer).

A single-file script that ``make bench`` times against rlrun. It shares its command line,
hyperparameters and JSON output with ``plain_torch_ppo.py``:

- ``GymWrapper`` over a gymnasium *sync* vector env in ``AutoresetMode.SAME_STEP`` (TorchRL
  refuses the default NEXT_STEP mode), with ``StepCounter`` and ``RewardSum`` transforms;
- ``ProbabilisticActor`` (tanh MLP -> logits -> ``Categorical``) and a separate ``ValueOperator``;
- ``torchrl.collectors.Collector``; ``GAE`` computed once per batch; ``ClipPPOLoss`` with
  ``loss_critic_type="l2"`` and per-minibatch advantage normalisation; Adam with a constant
  learning rate; global grad clipping; minibatches from a ``ReplayBuffer`` with
  ``SamplerWithoutReplacement``.

Prints one JSON line at the end. Timing starts after env, model and collector construction.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import deque

import gymnasium as gym
import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
from torchrl.envs import Compose, EnvBase, GymWrapper, RewardSum, StepCounter
from torchrl.modules import MLP, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--steps-per-env", type=int, default=128)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--total-frames", type=int, default=200_000)
    p.add_argument("--target-return", type=float, default=475.0)
    p.add_argument("--stop-at-target", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--verbose", action="store_true", help="per-batch progress on stderr")
    return p.parse_args()


def make_env(num_envs: int) -> EnvBase:
    vec = gym.make_vec(
        "CartPole-v1",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    env = GymWrapper(vec, categorical_action_encoding=True)  # a TransformedEnv (VecGymEnvTransform)
    return env.append_transform(Compose(StepCounter(), RewardSum()))


def main() -> None:
    args = parse_args()
    logging.getLogger("torchrl").setLevel(logging.WARNING)  # its INFO lines go to stdout
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t_setup = time.perf_counter()

    env = make_env(args.num_envs)
    env.set_seed(args.seed)
    obs_dim = env.observation_spec["observation"].shape[-1]
    n_actions = env.action_spec.space.n
    cells = [args.hidden, args.hidden]
    actor_net = MLP(
        in_features=obs_dim, out_features=n_actions, num_cells=cells, activation_class=nn.Tanh
    )
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        spec=env.action_spec,
        distribution_class=torch.distributions.Categorical,
        return_log_prob=True,
    )
    critic_net = MLP(in_features=obs_dim, out_features=1, num_cells=cells, activation_class=nn.Tanh)
    critic = ValueOperator(critic_net, in_keys=["observation"])

    frames_per_batch = args.num_envs * args.steps_per_env
    n_batches = -(-args.total_frames // frames_per_batch)  # round up, like the plain-torch loop
    collector = Collector(
        env,
        actor,
        frames_per_batch=frames_per_batch,
        total_frames=n_batches * frames_per_batch,
        auto_register_policy_transforms=False,  # MLP policy: no InitTracker/primers needed
    )
    advantage = GAE(
        gamma=args.gamma, lmbda=args.gae_lambda, value_network=critic, average_gae=False
    )
    loss_fn = ClipPPOLoss(
        actor,
        critic,
        clip_epsilon=args.clip,
        entropy_coeff=args.ent_coef,
        critic_coeff=args.vf_coef,
        loss_critic_type="l2",
        normalize_advantage=True,
    )
    optim = torch.optim.Adam(loss_fn.parameters(), lr=args.lr)
    rb = ReplayBuffer(
        storage=LazyTensorStorage(frames_per_batch),
        sampler=SamplerWithoutReplacement(),
        batch_size=frames_per_batch // args.minibatches,
    )

    recent: deque[float] = deque(maxlen=20)
    frames, frames_to_target, seconds_to_target = 0, None, None
    final_return, best_return = float("nan"), float("-inf")
    setup_s = time.perf_counter() - t_setup

    t0 = time.perf_counter()
    for data in collector:  # [num_envs, steps_per_env], time last
        frames += data.numel()
        finished = data["next", "episode_reward"][data["next", "done"]].tolist()

        with torch.no_grad():
            advantage(data)
        rb.empty()
        rb.extend(data.reshape(-1))
        for _ in range(args.epochs):
            for _ in range(args.minibatches):
                losses = loss_fn(rb.sample())
                loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                optim.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(loss_fn.parameters(), args.max_grad_norm)
                optim.step()

        recent.extend(finished)
        if finished:
            final_return = sum(finished) / len(finished)
        elif recent:
            final_return = sum(recent) / len(recent)
        if recent:
            best_return = max(best_return, final_return)
        if args.verbose:
            print(f"frames={frames} return={final_return:.1f}", file=sys.stderr)
        if frames_to_target is None and final_return >= args.target_return:
            frames_to_target, seconds_to_target = frames, time.perf_counter() - t0
            if args.stop_at_target:
                break

    wall = time.perf_counter() - t0
    collector.shutdown()
    result = {
        "impl": "plain_torchrl",
        "seed": args.seed,
        "frames": frames,
        "wall_time_s": round(wall, 3),
        "fps": round(frames / wall, 1),
        "frames_to_target": frames_to_target,
        "seconds_to_target": None if seconds_to_target is None else round(seconds_to_target, 3),
        "final_return": final_return if recent else None,
        "best_return": best_return if recent else None,
        "setup_s": round(setup_s, 3),
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
