"""Where SAC's update step spends its time on the CPU: rlrun's step (its ``TensorSACLoss`` on the
networks ``+experiment=sac`` builds, fused Adam, gradient clipping, soft target update), the same
step with TorchRL's own ``SACLoss`` (``torchrl``), and the plain PyTorch step of
``baselines/plain_torch_sac.py``, phase by phase, on the same random batches of 256 in one
process, one thread, interleaved rounds; then one twin-Q evaluation as TorchRL vmaps it against
two plain MLP calls and against both critics as one batched module.

    python bench/bench_sac_step.py [--env Pendulum-v1] [--steps 300]

Writes ``bench/results/sac_step.json`` and ``sac_step.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from baselines.plain_torch_sac import PlainSAC, mlp
from common import machine, write, write_markdown
from tensordict import TensorDict
from torch.func import functional_call, stack_module_state, vmap
from torchrl.envs import GymEnv
from torchrl.objectives import SACLoss, SoftUpdate

from rlrun.algorithms import sac
from rlrun.builders.policies import make_stochastic_actor_q

BATCH = 256


def random_batch(obs: int, act: int) -> TensorDict:
    """A replay sample of ``BATCH`` random transitions (actions in [-1, 1], none terminal)."""
    return TensorDict(
        {
            "observation": torch.randn(BATCH, obs),
            "action": torch.rand(BATCH, act) * 2 - 1,
            ("next", "observation"): torch.randn(BATCH, obs),
            ("next", "reward"): torch.randn(BATCH, 1),
            ("next", "done"): torch.zeros(BATCH, 1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(BATCH, 1, dtype=torch.bool),
        },
        [BATCH],
    )


def rlrun_phases(
    env: GymEnv, loss_class: type[SACLoss] | None = None
) -> Callable[[], dict[str, float]]:
    """One update of rlrun's SAC (``+experiment=sac``'s loss: ``TensorSACLoss``, l2, target
    entropy -|A|), or of the same step with ``loss_class`` (TorchRL's ``SACLoss``), timed by
    phase (ms)."""
    ac = make_stochastic_actor_q(observation_spec=env.observation_spec, action_spec=env.action_spec)
    act = env.action_spec.shape[-1]
    loss_class = loss_class or sac.__getattr__("TensorSACLoss")
    loss = loss_class(
        ac.actor,
        ac.qvalue,
        loss_function="l2",
        delay_qvalue=True,
        alpha_init=1.0,
        target_entropy=-float(act),
    )
    loss.make_value_estimator(gamma=0.99)
    optimizer = torch.optim.Adam(loss.parameters(), lr=3e-4, fused=True)
    target = SoftUpdate(loss, tau=0.005)
    params = list(loss.parameters())
    obs = env.observation_spec["observation"].shape[-1]

    def step() -> dict[str, float]:
        batch = random_batch(obs, act)
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        total = sum(v for k, v in loss(batch).items() if k.startswith("loss"))
        t1 = time.perf_counter()
        total.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        optimizer.step()
        target.step()
        t3 = time.perf_counter()
        return {"forward": t1 - t0, "backward": t2 - t1, "step": t3 - t2}

    return step


def plain_phases(env: GymEnv) -> Callable[[], dict[str, float]]:
    """One update of the plain PyTorch SAC (``baselines/plain_torch_sac.py``), timed by phase."""
    obs = env.observation_spec["observation"].shape[-1]
    act = env.action_spec.shape[-1]
    space = env.action_spec.space
    sac = PlainSAC(obs, act, space.low.numpy(), space.high.numpy(), torch.device("cpu"))

    def step() -> dict[str, float]:
        o, a, o2 = torch.randn(BATCH, obs), torch.rand(BATCH, act) * 2 - 1, torch.randn(BATCH, obs)
        r, d = torch.randn(BATCH, 1), torch.zeros(BATCH, 1)
        t0 = time.perf_counter()
        total = sac.loss(o, a, r, o2, d)
        t1 = time.perf_counter()
        total.backward()
        t2 = time.perf_counter()
        sac.step()
        t3 = time.perf_counter()
        return {"forward": t1 - t0, "backward": t2 - t1, "step": t3 - t2}

    return step


def batched_twin_q(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Both critics as one module: each layer one ``baddbmm`` over the stacked weights (the
    ensemble TorchRL's vmap builds, written out), ReLU between layers."""
    h = x.expand(2, *x.shape)
    for layer in (0, 2, 4):
        weight, bias = params[f"{layer}.weight"], params[f"{layer}.bias"]
        h = torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))
        if layer != 4:
            h = torch.relu(h)
    return h


def twin_q(env: GymEnv, calls: int) -> dict[str, dict[str, float]]:
    """One twin-Q evaluation (ms), forward alone and forward + backward: vmapped over stacked
    parameters, as TorchRL's losses call it; as two plain MLP calls; as one batched module."""
    width = env.observation_spec["observation"].shape[-1] + env.action_spec.shape[-1]
    nets = [mlp(width, 1), mlp(width, 1)]
    params, _ = stack_module_state(nets)
    base = mlp(width, 1).to("meta")
    vmapped = vmap(lambda p, x: functional_call(base, (p,), (x,)), in_dims=(0, None))
    x = torch.randn(BATCH, width)
    ways = {
        "vmap": lambda: vmapped(params, x),
        "two_mlps": lambda: torch.stack([n(x) for n in nets]),
        "batched": lambda: batched_twin_q(params, x),
    }
    for name, run in ways.items():  # the same function of the same weights, three ways
        torch.testing.assert_close(run(), ways["vmap"](), msg=name)
    out: dict[str, dict[str, float]] = {}
    for backward in (False, True):
        times: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(5):
            for name, run in ways.items():
                start = time.perf_counter()
                for _ in range(calls):
                    q = run()
                    if backward:
                        q.sum().backward()
                times[name].append((time.perf_counter() - start) / calls * 1000)
        phase = "forward_backward" if backward else "forward"
        out[phase] = {k: round(statistics.median(v), 3) for k, v in times.items()}
    return out


def interleaved(steps: dict[str, Callable[[], dict[str, float]]], n: int) -> dict:
    """Median ms per phase of each of ``steps`` over ``n`` updates, after 20 of warm-up, in
    interleaved rounds of 10 (a busy core slows every step alike); ``total`` is their sum."""
    phases: dict[str, dict[str, list[float]]] = {k: {} for k in steps}
    for _ in range(20):  # warm-up
        for step in steps.values():
            step()
    for _ in range(n // 10):  # rounds of 10 steps each, interleaved
        for name, step in steps.items():
            for _ in range(10):
                for phase, seconds in step().items():
                    phases[name].setdefault(phase, []).append(seconds * 1000)
    medians = {
        name: {phase: round(statistics.median(v), 3) for phase, v in by_phase.items()}
        for name, by_phase in phases.items()
    }
    for by_phase in medians.values():
        by_phase["total"] = round(sum(by_phase.values()), 3)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    env = GymEnv(args.env)
    steps = {
        "rlrun": rlrun_phases(env),
        "torchrl": rlrun_phases(env, SACLoss),
        "plain": plain_phases(env),
    }
    medians = interleaved(steps, args.steps)
    result = {
        "env": args.env,
        "steps": args.steps,
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "ms_per_update": medians,
        # the plain loop's time over each step's: 1.0 is the plain loop's pace
        "pace_of_plain": {
            name: round(medians["plain"]["total"] / m["total"], 3) for name, m in medians.items()
        },
        "twin_q_ms": twin_q(env, 50),
    }
    write("sac_step", result)
    rows = [
        f"| {name} | "
        + " | ".join(f"{v:.2f}" for v in m.values())
        + f" | {result['pace_of_plain'][name]:.2f} |"
        for name, m in medians.items()
    ]
    text = "\n".join([
        f"### SAC's update step on the CPU, phase by phase ({result['measured']})",
        "",
        f"`python bench/bench_sac_step.py --env {args.env}`: median ms per update over "
        f"{args.steps} updates of batches of {BATCH}, one thread, interleaved "
        f"({machine()}).",
        "",
        "| step | forward (loss) | backward | optimiser + target | total | plain's pace |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"One twin-Q evaluation (batch {BATCH}), ms, forward / forward + backward: vmapped "
        "as TorchRL's losses call it {vmap}; two plain MLP calls {two_mlps}; one batched "
        "module (a `baddbmm` a layer over the stacked weights) {batched}.".format(**{
            way: " / ".join(f"{result['twin_q_ms'][p][way]:.2f}" for p in result["twin_q_ms"])
            for way in result["twin_q_ms"]["forward"]
        }),
    ])  # fmt: skip
    write_markdown("sac_step", text + "\n")
    print(text)


if __name__ == "__main__":
    main()
