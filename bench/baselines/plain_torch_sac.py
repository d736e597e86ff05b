"""A lean PyTorch SAC of the shape ``rlrun +experiment=sac_mujoco`` trains, for speed only.

One gymnasium env, a numpy replay buffer, 256x256 ReLU actor (TanhNormal, state-dependent std)
and twin Q, a learned temperature, one gradient step on critics, actor and temperature per
collected frame with batches of 256, after ``--random`` random frames: CleanRL's
sac_continuous_action.py without its actor delay, as rlrun runs it. Prints one JSON line.

Usage: python bench/baselines/plain_torch_sac.py --env HalfCheetah-v5 --frames 4000 --random 1000
    [--device cuda]
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


def mlp(inp: int, out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inp, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, out)
    )


class PlainSAC:
    """The networks, the optimiser and one update of the loop (``bench/bench_sac_step.py``
    times its phases)."""

    def __init__(self, obs_dim: int, act_dim: int, low, high, device: torch.device) -> None:
        self.scale = torch.tensor((high - low) / 2, dtype=torch.float32, device=device)
        self.bias = torch.tensor((high + low) / 2, dtype=torch.float32, device=device)
        self.actor = mlp(obs_dim, 2 * act_dim).to(device)
        self.q1, self.q2 = (
            mlp(obs_dim + act_dim, 1).to(device),
            mlp(obs_dim + act_dim, 1).to(device),
        )
        self.q1_t, self.q2_t = (
            mlp(obs_dim + act_dim, 1).to(device),
            mlp(obs_dim + act_dim, 1).to(device),
        )
        self.q1_t.load_state_dict(self.q1.state_dict())
        self.q2_t.load_state_dict(self.q2.state_dict())
        self.log_alpha = torch.zeros(1, requires_grad=True, device=device)
        params = [*self.actor.parameters(), *self.q1.parameters(), *self.q2.parameters()]
        self.optimizer = torch.optim.Adam([*params, self.log_alpha], lr=3e-4)
        self.target_entropy = -float(act_dim)

    def act(self, o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(o).chunk(2, -1)
        std = F.softplus(log_std) + 1e-4
        normal = torch.distributions.Normal(mean, std)
        u = normal.rsample()
        y = torch.tanh(u)
        scale = self.scale
        log_prob = (normal.log_prob(u) - torch.log(scale * (1 - y.pow(2)) + 1e-6)).sum(-1, True)
        return y * scale + self.bias, log_prob

    def loss(self, o, a, r, o2, d) -> torch.Tensor:
        """Critics', actor's and temperature's losses summed, the gradients zeroed."""
        q1, q2, q1_t, q2_t = self.q1, self.q2, self.q1_t, self.q2_t
        alpha = self.log_alpha.exp()
        with torch.no_grad():
            a2, logp2 = self.act(o2)
            oa2 = torch.cat([o2, a2], -1)
            target = r + 0.99 * (1 - d) * (torch.min(q1_t(oa2), q2_t(oa2)) - alpha * logp2)
        oa = torch.cat([o, a], -1)
        loss_q = F.mse_loss(q1(oa), target) + F.mse_loss(q2(oa), target)
        a_new, logp = self.act(o)
        oan = torch.cat([o, a_new], -1)
        for p in [*q1.parameters(), *q2.parameters()]:
            p.requires_grad_(False)
        loss_pi = (alpha.detach() * logp - torch.min(q1(oan), q2(oan))).mean()
        for p in [*q1.parameters(), *q2.parameters()]:
            p.requires_grad_(True)
        loss_alpha = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.optimizer.zero_grad()
        return loss_q + loss_pi + loss_alpha

    def step(self) -> None:
        """The optimiser's step, then the soft target update."""
        self.optimizer.step()
        with torch.no_grad():
            for net, tgt in ((self.q1, self.q1_t), (self.q2, self.q2_t)):
                for p, pt in zip(net.parameters(), tgt.parameters(), strict=True):
                    pt.lerp_(p, 0.005)

    def explore(self, o: torch.Tensor) -> torch.Tensor:
        """The collector's action: a sample of the policy."""
        return self.act(o)[0]

    def update(self, *batch: torch.Tensor) -> None:
        self.loss(*batch).backward()
        self.step()


def arguments(doc: str) -> argparse.Namespace:
    """The command line every plain off-policy loop here shares."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--frames", type=int, default=4000)
    parser.add_argument("--random", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    return args


def train(make_agent, args: argparse.Namespace) -> None:
    """One env, a numpy replay buffer, ``--random`` random frames, then one ``agent.update``
    of a batch of 256 per collected frame; prints the JSON line. ``make_agent(obs_dim,
    act_dim, low, high, device)`` builds the agent (``explore`` and ``update``)."""
    device = torch.device(args.device)
    env = gym.make(args.env)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    space = env.action_space
    agent = make_agent(obs_dim, act_dim, space.low, space.high, device)
    size = args.frames
    buf_o = np.zeros((size, obs_dim), np.float32)
    buf_a = np.zeros((size, act_dim), np.float32)
    buf_r = np.zeros((size, 1), np.float32)
    buf_o2 = np.zeros((size, obs_dim), np.float32)
    buf_d = np.zeros((size, 1), np.float32)

    obs, _ = env.reset(seed=args.seed)
    updates, start, learn_start = 0, time.perf_counter(), None
    for t in range(args.frames):
        if t < args.random:
            action = env.action_space.sample()
        else:
            with torch.no_grad():
                o = torch.as_tensor(obs, dtype=torch.float32, device=device)[None]
                action = agent.explore(o)[0].cpu().numpy()
        obs2, reward, terminated, truncated, _ = env.step(action)
        buf_o[t], buf_a[t], buf_r[t], buf_o2[t], buf_d[t] = obs, action, reward, obs2, terminated
        obs = env.reset()[0] if terminated or truncated else obs2
        if t + 1 < args.random:
            continue
        learn_start = learn_start or time.perf_counter()
        idx = np.random.randint(0, t + 1, 256)
        batch = (
            torch.as_tensor(b[idx], device=device) for b in (buf_o, buf_a, buf_r, buf_o2, buf_d)
        )
        agent.update(*batch)
        updates += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    end = time.perf_counter()
    print(
        json.dumps(
            {
                "frames": args.frames,
                "fps": args.frames / (end - start),
                "updates_per_s": updates / (end - learn_start),
            }
        )
    )


def main() -> None:
    train(PlainSAC, arguments(__doc__))


if __name__ == "__main__":
    main()
