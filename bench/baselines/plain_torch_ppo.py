"""Baseline for ``bench/``: PPO on CartPole-v1 in plain PyTorch + gymnasium (CleanRL style).

A hand-written single-file PPO loop that ``make bench`` times against rlrun. It shares its
command line, hyperparameters and JSON output with ``plain_torchrl_ppo.py``:

- a gymnasium *sync* vector env in ``AutoresetMode.SAME_STEP`` (the same env TorchRL wraps);
  truncated episodes are bootstrapped with ``V(final_obs)``, like TorchRL's GAE does;
- separate tanh actor and critic MLPs, GAE computed once per batch, clipped surrogate,
  un-clipped value loss ``vf_coef * MSE`` (TorchRL's ``loss_critic_type="l2"``), entropy bonus,
  Adam with a constant learning rate, per-minibatch advantage normalisation, global grad clipping.

Prints one JSON line at the end. Timing starts after env and model construction.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque

import gymnasium as gym
import numpy as np
import torch
from torch import nn


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


def mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(n_in, hidden),
        nn.Tanh(),
        nn.Linear(hidden, hidden),
        nn.Tanh(),
        nn.Linear(hidden, n_out),
    )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    # TorchRL switches distribution argument validation off on import; do the same here.
    torch.distributions.Distribution.set_default_validate_args(False)
    np.random.seed(args.seed)
    t_setup = time.perf_counter()

    n, steps = args.num_envs, args.steps_per_env
    envs = gym.make_vec(
        "CartPole-v1",
        num_envs=n,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    n_actions = int(envs.single_action_space.n)
    actor = mlp(obs_dim, args.hidden, n_actions)
    critic = mlp(obs_dim, args.hidden, 1)
    params = list(actor.parameters()) + list(critic.parameters())
    optim = torch.optim.Adam(params, lr=args.lr)

    obs_buf = torch.zeros(steps, n, obs_dim)
    act_buf = torch.zeros(steps, n, dtype=torch.long)
    logp_buf = torch.zeros(steps, n)
    rew_buf = torch.zeros(steps, n)
    done_buf = torch.zeros(steps, n)  # episode ended (terminated or truncated) after step t
    val_buf = torch.zeros(steps, n)
    frames_per_batch = n * steps
    mb_size = frames_per_batch // args.minibatches

    ep_ret = np.zeros(n)
    recent: deque[float] = deque(maxlen=20)
    frames, frames_to_target, seconds_to_target = 0, None, None
    final_return, best_return = float("nan"), float("-inf")
    setup_s = time.perf_counter() - t_setup

    t0 = time.perf_counter()
    np_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.from_numpy(np_obs)
    while frames < args.total_frames:
        finished: list[float] = []
        with torch.no_grad():
            for t in range(steps):
                obs_buf[t] = next_obs
                dist = torch.distributions.Categorical(logits=actor(next_obs))
                action = dist.sample()
                act_buf[t], logp_buf[t] = action, dist.log_prob(action)
                val_buf[t] = critic(next_obs).squeeze(-1)
                np_obs, r, term, trunc, info = envs.step(action.numpy())
                reward = torch.as_tensor(r, dtype=torch.float32)
                boot = trunc & ~term
                if boot.any():  # bootstrap time-limit truncations from the true last obs
                    last = torch.from_numpy(np.stack(info["final_obs"][boot]))
                    reward[torch.from_numpy(boot)] += args.gamma * critic(last).squeeze(-1)
                rew_buf[t] = reward
                done = term | trunc
                done_buf[t] = torch.from_numpy(done)
                ep_ret += r
                for i in np.flatnonzero(done):
                    finished.append(float(ep_ret[i]))
                    ep_ret[i] = 0.0
                next_obs = torch.from_numpy(np_obs)

            # GAE
            next_val = critic(next_obs).squeeze(-1)
            adv = torch.zeros(steps, n)
            last_gae = torch.zeros(n)
            for t in reversed(range(steps)):
                not_done = 1.0 - done_buf[t]
                v_next = next_val if t == steps - 1 else val_buf[t + 1]
                delta = rew_buf[t] + args.gamma * v_next * not_done - val_buf[t]
                last_gae = delta + args.gamma * args.gae_lambda * not_done * last_gae
                adv[t] = last_gae
            ret = adv + val_buf

        b_obs, b_act = obs_buf.reshape(-1, obs_dim), act_buf.reshape(-1)
        b_logp, b_adv, b_ret = logp_buf.reshape(-1), adv.reshape(-1), ret.reshape(-1)
        for _ in range(args.epochs):
            perm = torch.randperm(frames_per_batch)
            for start in range(0, frames_per_batch - mb_size + 1, mb_size):
                idx = perm[start : start + mb_size]
                dist = torch.distributions.Categorical(logits=actor(b_obs[idx]))
                ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
                mb_adv = b_adv[idx]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = -torch.min(
                    ratio * mb_adv, ratio.clamp(1 - args.clip, 1 + args.clip) * mb_adv
                ).mean()
                v_loss = (critic(b_obs[idx]).squeeze(-1) - b_ret[idx]).pow(2).mean()
                loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * dist.entropy().mean()
                optim.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(params, args.max_grad_norm)
                optim.step()

        frames += frames_per_batch
        recent.extend(finished)
        if finished:
            final_return = float(np.mean(finished))
        elif recent:
            final_return = float(np.mean(recent))
        if recent:
            best_return = max(best_return, final_return)
        if args.verbose:
            print(f"frames={frames} return={final_return:.1f}", file=sys.stderr)
        if frames_to_target is None and final_return >= args.target_return:
            frames_to_target, seconds_to_target = frames, time.perf_counter() - t0
            if args.stop_at_target:
                break

    wall = time.perf_counter() - t0
    envs.close()
    result = {
        "impl": "plain_torch",
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
