"""A lean PyTorch DQN of the shape ``rlrun +experiment=dqn`` trains, for speed only.

CartPole-v1 in a gymnasium sync vector env of ``--envs`` envs (same-step autoreset, as rlrun's),
a tensor replay buffer, a 256x256 ReLU Q-network and its target copy, double DQN with a Huber
loss, Adam (lr 2.3e-3, eps 1e-5), gradient clipping at 10, one update of a 64-transition batch
per 2 collected frames after ``--random`` random frames, a hard target copy every 128 updates,
epsilon annealed linearly from 1 to 0.01 over 10000 frames: the preset's settings, without a
framework. Prints one JSON line (frames/s over the run, update steps/s once learning started).

Usage: python bench/baselines/plain_torch_dqn.py --frames 20480 --random 1024 [--device cuda]
    [--flush-denormal]
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=20480)
    parser.add_argument("--random", type=int, default=1024)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=256, help="frames collected per batch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--flush-denormal", action="store_true", help="floats under 1.2e-38 as 0, as rlrun's"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.set_flush_denormal(args.flush_denormal)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    env = gym.make_vec(
        "CartPole-v1",
        num_envs=args.envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    obs_dim, n_actions = env.single_observation_space.shape[0], env.single_action_space.n

    def qnet() -> nn.Module:
        return nn.Sequential(
            nn.Linear(obs_dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
            nn.Linear(256, n_actions),
        ).to(device)  # fmt: skip

    q, q_target = qnet(), qnet()
    q_target.load_state_dict(q.state_dict())
    optimizer = torch.optim.Adam(q.parameters(), lr=2.3e-3, eps=1e-5)
    size = args.frames
    buf = {
        "o": torch.zeros(size, obs_dim, device=device),
        "a": torch.zeros(size, dtype=torch.long, device=device),
        "r": torch.zeros(size, device=device),
        "o2": torch.zeros(size, obs_dim, device=device),
        "d": torch.zeros(size, device=device),
    }
    obs, _ = env.reset(seed=args.seed)
    frames = updates = stored = 0
    start, learn_start = time.perf_counter(), None
    while frames < args.frames:
        for _ in range(args.batch // args.envs):  # collect one batch
            eps = max(0.01, 1.0 - frames / 10000 * 0.99)
            if frames < args.random:
                action = env.action_space.sample()
            else:
                with torch.no_grad():
                    greedy = q(torch.as_tensor(obs, dtype=torch.float32, device=device)).argmax(-1)
                action = greedy.cpu().numpy()
                explore = np.random.rand(args.envs) < eps
                action[explore] = np.random.randint(n_actions, size=int(explore.sum()))
            obs2, reward, terminated, truncated, info = env.step(action)
            final = obs2.copy()  # SAME_STEP: obs2 of a finished env is the next episode's start
            done_any = terminated | truncated
            if done_any.any() and "final_obs" in info:
                final[done_any] = np.stack(info["final_obs"][done_any])
            rows = slice(stored, stored + args.envs)
            for key, value in (("o", obs), ("a", action), ("r", reward), ("o2", final),
                               ("d", terminated)):  # fmt: skip
                buf[key][rows] = torch.as_tensor(np.asarray(value), device=device).to(buf[key])
            stored += args.envs
            frames += args.envs
            obs = obs2
        if frames <= args.random:
            continue
        learn_start = learn_start or time.perf_counter()
        for _ in range(args.batch // 2):  # utd 0.5
            idx = torch.randint(0, stored, (64,), device=device)
            o, a, r, o2, d = (buf[k][idx] for k in ("o", "a", "r", "o2", "d"))
            with torch.no_grad():
                best = q(o2).argmax(-1, keepdim=True)
                target = r + 0.99 * (1 - d) * q_target(o2).gather(-1, best).squeeze(-1)
            loss = F.smooth_l1_loss(q(o).gather(-1, a[:, None]).squeeze(-1), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(q.parameters(), 10.0)
            optimizer.step()
            updates += 1
            if updates % 128 == 0:
                q_target.load_state_dict(q.state_dict())
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    end = time.perf_counter()
    print(
        json.dumps(
            {
                "frames": frames,
                "fps": frames / (end - start),
                "updates_per_s": updates / (end - learn_start),
            }
        )
    )


if __name__ == "__main__":
    main()
