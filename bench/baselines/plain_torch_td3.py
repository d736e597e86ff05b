"""A lean PyTorch TD3 of the shape ``rlrun +experiment=td3_mujoco`` trains, for speed only.

CleanRL's td3_continuous_action.py: one gymnasium env, a numpy replay buffer, a 256x256 ReLU
deterministic actor (tanh, scaled to the action bounds) and twin Q, their target copies; one
critic step of a batch of 256 per collected frame after ``--random`` random frames, the actor's
step and the soft target update every 2 critic steps; target policy smoothing (noise 0.2, clipped
at 0.5) and Gaussian exploration noise 0.1, both relative to half the action range. The collection
loop and the JSON line are ``plain_torch_sac.py``'s, so the two time the same things.

Usage: python bench/baselines/plain_torch_td3.py --env HalfCheetah-v5 --frames 4000 --random 1000
    [--device cuda]
"""

from __future__ import annotations

import copy

import torch
from plain_torch_sac import arguments, mlp, train
from torch.nn import functional as F

POLICY_DELAY, TAU, GAMMA = 2, 0.005, 0.99
POLICY_NOISE, NOISE_CLIP, EXPLORATION_NOISE = 0.2, 0.5, 0.1


class PlainTD3:
    def __init__(self, obs_dim: int, act_dim: int, low, high, device: torch.device) -> None:
        self.scale = torch.tensor((high - low) / 2, dtype=torch.float32, device=device)
        self.bias = torch.tensor((high + low) / 2, dtype=torch.float32, device=device)
        self.low = torch.as_tensor(low, dtype=torch.float32, device=device)
        self.high = torch.as_tensor(high, dtype=torch.float32, device=device)
        self.actor = mlp(obs_dim, act_dim).to(device)
        self.q1, self.q2 = (mlp(obs_dim + act_dim, 1).to(device) for _ in range(2))
        self.pairs = [(n, copy.deepcopy(n)) for n in (self.actor, self.q1, self.q2)]
        self.actor_t, self.q1_t, self.q2_t = (target for _, target in self.pairs)
        self.critic_optimizer = torch.optim.Adam(
            [*self.q1.parameters(), *self.q2.parameters()], lr=3e-4
        )
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.steps = 0

    def act(self, actor: torch.nn.Module, o: torch.Tensor) -> torch.Tensor:
        return torch.tanh(actor(o)) * self.scale + self.bias

    def explore(self, o: torch.Tensor) -> torch.Tensor:
        a = self.act(self.actor, o)
        return (a + torch.randn_like(a) * self.scale * EXPLORATION_NOISE).clamp(self.low, self.high)

    def update(self, o, a, r, o2, d) -> None:
        with torch.no_grad():
            noise = (torch.randn_like(a) * POLICY_NOISE).clamp(-NOISE_CLIP, NOISE_CLIP)
            a2 = (self.act(self.actor_t, o2) + noise * self.scale).clamp(self.low, self.high)
            oa2 = torch.cat([o2, a2], -1)
            target = r + GAMMA * (1 - d) * torch.min(self.q1_t(oa2), self.q2_t(oa2))
        oa = torch.cat([o, a], -1)
        loss_q = F.mse_loss(self.q1(oa), target) + F.mse_loss(self.q2(oa), target)
        self.critic_optimizer.zero_grad()
        loss_q.backward()
        self.critic_optimizer.step()
        self.steps += 1
        if self.steps % POLICY_DELAY:
            return
        loss_pi = -self.q1(torch.cat([o, self.act(self.actor, o)], -1)).mean()
        self.actor_optimizer.zero_grad()
        loss_pi.backward()
        self.actor_optimizer.step()
        with torch.no_grad():
            for net, tgt in self.pairs:
                for p, pt in zip(net.parameters(), tgt.parameters(), strict=True):
                    pt.lerp_(p, TAU)


def main() -> None:
    train(PlainTD3, arguments(__doc__))


if __name__ == "__main__":
    main()
