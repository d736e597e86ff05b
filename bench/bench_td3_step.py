"""TD3's update step on the CPU: rlrun's step (through ``UpdateStep``: loss, backward, fused Adam,
gradient clipping, soft target update after the actor's steps, the actor's term every second
step) with TorchRL's ``TD3Loss`` and with rlrun's ``TensorTD3Loss`` (the same terms on tensors),
against the plain PyTorch step of ``baselines/plain_torch_td3.py`` (CleanRL's TD3), on the same
random batches of 256 of ``+experiment=td3_mujoco``'s shapes, in one process, one thread,
interleaved rounds. First it checks that the two losses train alike on these shapes (to the
critics' rounding: the largest difference of a term or weight, relative to the tensor's largest
value).

    python bench/bench_td3_step.py [--env HalfCheetah-v5] [--rounds 60]

Writes ``bench/results/td3_step.json`` and ``td3_step.md``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from bench_sac_step import BATCH, random_batch
from common import machine, write, write_markdown
from omegaconf import OmegaConf
from tensordict import TensorDict
from torchrl.envs import GymEnv
from torchrl.objectives import TD3Loss, ValueEstimators

from rlrun.algorithms.td3 import TensorTD3Loss
from rlrun.builders.offpolicy import twin_delayed
from rlrun.builders.policies import ActorCritic, make_deterministic_actor_q
from rlrun.builders.updates import UpdateStep

sys.path.insert(0, str(Path(__file__).resolve().parent / "baselines"))  # its own imports
from plain_torch_td3 import PlainTD3  # noqa: E402

ROUND = 10  # steps a round: an even count, so each round has as many actor steps
# conf/experiment/td3_mujoco.yaml over conf/algo/td3.yaml and _base.yaml
ALGO = OmegaConf.create({
    "num_qvalue_nets": 2, "policy_noise": 0.2, "noise_clip": 0.5, "loss_function": "l2",
    "policy_delay": 2, "tau": 0.005, "gamma": 0.99, "max_grad_norm": 10.0,
})  # fmt: skip


def batches(env: GymEnv, n: int) -> list[TensorDict]:
    obs, act = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    return [random_batch(obs, act) for _ in range(n)]


def rlrun_step(loss_class: type, ac: ActorCritic) -> tuple[UpdateStep, Callable]:
    """rlrun's update step for TD3 as ``rlrun/algorithms/td3.py`` builds it, with
    ``loss_class``; returns it and one step on a batch."""
    ac = copy.deepcopy(ac)
    torch.manual_seed(1)  # TorchRL draws the second critic's initial weights
    loss, updater = twin_delayed(loss_class, ALGO, ac)
    loss.make_value_estimator(ValueEstimators.TD0, gamma=ALGO.gamma)
    optimizer = torch.optim.Adam(loss.parameters(), lr=3e-4, fused=True)  # as make_optimizer
    step = UpdateStep(
        loss, optimizer, ALGO.max_grad_norm, torch.device("cpu"), target_updater=updater
    )
    trainer = type("T", (), {"_post_loss_hook": lambda self, batch: None})()
    return step, lambda batch: step.step(trainer, batch)


def same_training(ac: ActorCritic, data: list[TensorDict]) -> float:
    """The largest difference between TorchRL's loss and the tensor loss trained on ``data``'s
    steps (the same target smoothing noise), over every step's terms and the weights after,
    each relative to its tensor's largest value."""
    runs = []
    for loss_class in (TD3Loss, TensorTD3Loss):
        step, run = rlrun_step(loss_class, ac)
        torch.manual_seed(2)
        outs = [run(b.clone()) for b in data]
        runs.append((outs, step.loss.state_dict()))
        if loss_class is TensorTD3Loss and not step.loss.direct:
            raise RuntimeError("TensorTD3Loss fell back to TorchRL's terms on these networks")
    (ref_outs, ref_state), (outs, state) = runs
    pairs = [(out.get(key), ref.get(key)) for out, ref in zip(outs, ref_outs, strict=True)
             for key in ref.keys()]  # fmt: skip
    pairs += [(state[key], value) for key, value in ref_state.items()]
    return max(
        float((got.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-12))
        for got, ref in pairs
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    env = GymEnv(args.env)
    hidden = [256, 256]
    spec = {"observation_spec": env.observation_spec, "action_spec": env.action_spec}
    ac = make_deterministic_actor_q(**spec, hidden_sizes=hidden)
    data = batches(env, ROUND)
    same = same_training(ac, data[:6])
    space = env.action_spec.space
    obs, act = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    plain = PlainTD3(obs, act, space.low.numpy(), space.high.numpy(), torch.device("cpu"))

    def plain_step(batch: TensorDict) -> None:
        plain.update(
            batch["observation"],
            batch["action"],
            batch["next", "reward"],
            batch["next", "observation"],
            batch["next", "terminated"].float(),
        )

    steps = {
        "torchrl_loss": rlrun_step(TD3Loss, ac)[1],
        "tensor_loss": rlrun_step(TensorTD3Loss, ac)[1],
        "plain": plain_step,
    }
    times: dict[str, list[float]] = {name: [] for name in steps}  # ms a step, per round
    for warm in (True, False):
        for _ in range(3 if warm else args.rounds):
            for name, step in steps.items():
                inputs = [b.clone() for b in data]  # outside the clock
                start = time.perf_counter()
                for b in inputs:
                    step(b)
                if not warm:
                    times[name].append((time.perf_counter() - start) / ROUND * 1000)
    ms = {name: round(statistics.median(v), 3) for name, v in times.items()}
    result = {
        "env": args.env,
        "hidden_sizes": hidden,
        "batch": BATCH,
        "rounds": args.rounds,
        "steps_per_round": ROUND,
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "largest_relative_difference": same,
        "ms_per_update": ms,
        "updates_per_s": {name: round(1000 / v, 1) for name, v in ms.items()},
        "tensor_vs_torchrl": round(ms["torchrl_loss"] / ms["tensor_loss"], 3),
        "pace_vs_plain": {
            name: round(ms["plain"] / ms[name], 3) for name in ("torchrl_loss", "tensor_loss")
        },
    }
    write("td3_step", result)
    text = "\n".join([
        f"### TD3's update step on the CPU ({result['measured']})",
        "",
        f"`python bench/bench_td3_step.py --env {args.env}`: median over {args.rounds} "
        f"interleaved rounds of the mean ms per update step in a round of {ROUND} (half of "
        f"them with the actor's term), batches of {BATCH}, {hidden[0]}x{hidden[1]} networks, "
        f"one thread ({machine()}). rlrun's step is `UpdateStep` (loss, backward, fused Adam, "
        "clipping, soft target update) on TD3 as `rlrun/algorithms/td3.py` builds it; plain: "
        "`baselines/plain_torch_td3.py`'s update.",
        "",
        "| step | ms per update | updates/s | pace vs plain |",
        "|---|---|---|---|",
        *(
            f"| {name} | {ms[name]:.2f} | {result['updates_per_s'][name]:.0f} | "
            f"{ms['plain'] / ms[name]:.2f}x |"
            for name in steps
        ),
        "",
        "TorchRL's `TD3Loss` and `TensorTD3Loss` trained on the same 6 batches: largest "
        f"difference of a term or weight, relative to its tensor's largest value, {same:.1e}.",
    ])  # fmt: skip
    write_markdown("td3_step", text + "\n")
    print(text)


if __name__ == "__main__":
    main()
