"""A plain PyTorch CQL(H), written from the paper (Kumar et al. 2020) and the authors' code as
CORL describes it, to run beside ``rlrun +experiment=cql`` on the same Minari dataset and the
same number of optimisation steps (issue #48): does CQL itself learn there, or only rlrun's?

SAC-based CQL with the importance-sampled conservative term (the code's ``min_q_version=3``):
per state, one log-sum-exp over ``num_random`` uniform actions, ``num_random`` actions of pi(s)
and ``num_random`` of pi(s'), all taken at s, each less its log-density (detached), minus Q of
the dataset's action, times ``min_q_weight``; twin Q (the minimum in the target and the actor's
loss), no entropy in the target (CORL's default), a learned temperature (target entropy
-|A|), soft target updates. The paper's learning rates: 1e-4 actor, 3e-4 critics and
temperature, three Adams; no gradient clipping. Networks as rlrun's preset: 256x256 ReLU, a
TanhNormal actor with a state-dependent std scaled to the action bounds.

Evaluates the deterministic policy (tanh of the mean) every ``--eval-every`` steps over
``--episodes`` episodes and prints one JSON line per evaluation, with Minari's normalised score.

Usage: MINARI_DATASETS_PATH=... python bench/baselines/plain_torch_cql.py \
    --dataset rlrun/pendulum/expert-v0 --steps 3000 --eval-every 1000
"""

from __future__ import annotations

import argparse
import json
import math
import time

import minari
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def mlp(inp: int, out: int, hidden: int = 256) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, out),
    )  # fmt: skip


class Actor(nn.Module):
    """TanhNormal scaled to [low, high]; log-std clamped to [-20, 2] as the CQL code's."""

    def __init__(self, obs_dim: int, act_dim: int, low: torch.Tensor, high: torch.Tensor):
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim)
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample and its log-density (in the scaled action space)."""
        mean, log_std = self.net(obs).chunk(2, -1)
        std = log_std.clamp(-20, 2).exp()
        u = mean + std * torch.randn_like(mean)
        t = torch.tanh(u)
        log_prob = torch.distributions.Normal(mean, std).log_prob(u)
        log_prob = log_prob - torch.log(self.scale * (1 - t.pow(2)) + 1e-6)
        return t * self.scale + self.bias, log_prob.sum(-1)

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        mean, _ = self.net(obs).chunk(2, -1)
        return torch.tanh(mean) * self.scale + self.bias


def load(dataset_id: str) -> tuple[dict[str, torch.Tensor], minari.MinariDataset]:
    """The dataset's transitions; bootstrapping stops at terminations only (not truncations)."""
    dataset = minari.load_dataset(dataset_id)
    parts: dict[str, list] = {k: [] for k in ("obs", "act", "rew", "next_obs", "term")}
    for ep in dataset.iterate_episodes():
        parts["obs"].append(ep.observations[:-1])
        parts["next_obs"].append(ep.observations[1:])
        parts["act"].append(ep.actions.reshape(len(ep.rewards), -1))
        parts["rew"].append(ep.rewards)
        parts["term"].append(ep.terminations)
    data = {k: torch.as_tensor(np.concatenate(v), dtype=torch.float32) for k, v in parts.items()}
    return data, dataset


def evaluate(actor: Actor, env, episodes: int, seed: int) -> float:
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        done, total = False, 0.0
        while not done:
            with torch.no_grad():
                action = actor.act(torch.as_tensor(obs, dtype=torch.float32)).numpy()
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--eval-every", type=int, default=5000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--num-random", type=int, default=10)
    parser.add_argument("--min-q-weight", type=float, default=5.0)
    parser.add_argument("--actor-lr", type=float, default=1e-4)
    parser.add_argument("--critic-lr", type=float, default=3e-4)
    parser.add_argument("--bc-steps", type=int, default=0)  # the code's policy_eval_start
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--tau", type=float, default=0.005)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    data, dataset = load(args.dataset)
    env = dataset.recover_environment()
    space = env.action_space
    low = torch.as_tensor(space.low, dtype=torch.float32)
    high = torch.as_tensor(space.high, dtype=torch.float32)
    obs_dim, act_dim = data["obs"].shape[-1], data["act"].shape[-1]
    actor = Actor(obs_dim, act_dim, low, high)
    qs = nn.ModuleList([mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)])
    targets = nn.ModuleList([mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)])
    targets.load_state_dict(qs.state_dict())
    targets.requires_grad_(False)
    log_alpha = torch.zeros((), requires_grad=True)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)
    critic_opt = torch.optim.Adam(qs.parameters(), lr=args.critic_lr)
    alpha_opt = torch.optim.Adam([log_alpha], lr=args.critic_lr)
    target_entropy = -float(act_dim)
    log_uniform = -float(torch.log(high - low).sum())  # the uniform's log-density
    n, size, b = args.num_random, len(data["obs"]), args.batch

    def q_all(nets: nn.ModuleList, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, act], -1)
        return torch.stack([net(x).squeeze(-1) for net in nets])  # [2, batch]

    start, steps_s = time.perf_counter(), 0.0
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        idx = torch.randint(size, (b,))
        obs, act, rew = data["obs"][idx], data["act"][idx], data["rew"][idx]
        next_obs, term = data["next_obs"][idx], data["term"][idx]

        # actor and temperature (SAC's; behaviour cloning for the first bc_steps)
        alpha = log_alpha.exp().detach()
        new_act, log_pi = actor(obs)
        if step <= args.bc_steps:
            mean, log_std = actor.net(obs).chunk(2, -1)
            std = log_std.clamp(-20, 2).exp()
            t = ((act - actor.bias) / actor.scale).clamp(-1 + 1e-6, 1 - 1e-6)
            u = torch.atanh(t)
            logp_data = torch.distributions.Normal(mean, std).log_prob(u)
            logp_data = (logp_data - torch.log(actor.scale * (1 - t.pow(2)) + 1e-6)).sum(-1)
            actor_loss = (alpha * log_pi - logp_data).mean()
        else:
            actor_loss = (alpha * log_pi - q_all(qs, obs, new_act).min(0).values).mean()
        actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        actor_opt.step()
        alpha_loss = -(log_alpha * (log_pi.detach() + target_entropy)).mean()
        alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        alpha_opt.step()

        # critics: TD(0) to the twin target's minimum, plus the conservative term
        with torch.no_grad():
            next_act, _ = actor(next_obs)
            next_q = q_all(targets, next_obs, next_act).min(0).values
            target = rew + args.gamma * (1 - term) * next_q
            rep_obs = obs.repeat_interleave(n, 0)
            act_s, logp_s = actor(rep_obs)
            act_next, logp_next = actor(next_obs.repeat_interleave(n, 0))
            uniform = torch.rand(b * n, act_dim) * (high - low) + low
        pred = q_all(qs, obs, act)
        td = F.mse_loss(pred, target.expand_as(pred), reduction="none").mean(1).sum()
        cat_obs = torch.cat([rep_obs] * 3)
        q_sampled = q_all(qs, cat_obs, torch.cat([uniform, act_s, act_next]))  # [2, 3 b n]
        density = torch.cat([torch.full_like(logp_s, log_uniform), logp_s, logp_next])
        q_sampled = (q_sampled - density).reshape(2, 3, b, n).transpose(1, 2).reshape(2, b, -1)
        gap = (torch.logsumexp(q_sampled, -1).mean(1) - pred.mean(1)) * args.min_q_weight
        critic_loss = td + gap.sum()
        critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic_opt.step()
        with torch.no_grad():
            for p, tp in zip(qs.parameters(), targets.parameters(), strict=True):
                tp.lerp_(p, args.tau)
        steps_s += time.perf_counter() - t0

        if step % args.eval_every == 0 or step == args.steps:
            ret = evaluate(actor, env, args.episodes, seed=1000)
            score = float(minari.get_normalized_score(dataset, np.array([ret]))[0])
            print(json.dumps({
                "step": step, "eval_return": round(ret, 1), "score": round(score, 3),
                "loss_td": round(td.item(), 3), "gap": round(gap.sum().item(), 3),
                "q_data": round(pred.mean().item(), 2), "alpha": round(alpha.item(), 4),
                "steps_per_s": round(step / steps_s, 2),
                "wall_s": round(time.perf_counter() - start),
            }), flush=True)  # fmt: skip
    assert math.isfinite(critic_loss.item())


if __name__ == "__main__":
    main()
