"""TD3's loss on tensors (:class:`rlrun.algorithms.td3.TensorTD3Loss`) against TorchRL's
``TD3Loss``, both delayed as rlrun builds TD3 (``with_delayed_actor(..., skips_actor=True)``) and
trained through rlrun's update step on copies of the same networks, the same batches and the
same target smoothing noise: the same loss terms, logged values, priorities and weights, to float32
rounding (each critic is one plain MLP call on the tensor path, where TorchRL's vmap adds the bias
after the matmul: a few 1e-7 apart)."""

from __future__ import annotations

import copy
from collections import Counter

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Bounded, Composite, Unbounded
from torchrl.objectives import TD3Loss, ValueEstimators

from rlrun.algorithms.td3 import TensorTD3Loss
from rlrun.builders.offpolicy import DelayedSoftUpdate, with_delayed_actor
from rlrun.builders.policies import ActorCritic, make_deterministic_actor_q
from rlrun.builders.updates import UpdateStep

OBS = Composite(observation=Unbounded(shape=(5,)))
# uneven bounds: the actor's tanh is scaled and shifted, the smoothed target action clamped
ACTION = Bounded(torch.tensor([-2.0, -1.0, 0.0]), torch.tensor([2.0, 0.5, 3.0]), shape=(3,))


def batch(n: int = 64, weighted: bool = False) -> TensorDict:
    terminated = torch.rand(n, 1) < 0.2
    data = {
        "observation": torch.randn(n, 5),
        "action": ACTION.rand((n,)),
        ("next", "observation"): torch.randn(n, 5),
        ("next", "reward"): torch.randn(n, 1),
        ("next", "done"): terminated.clone(),
        ("next", "terminated"): terminated,
    }
    if weighted:
        data["priority_weight"] = torch.rand(n) + 0.5
    return TensorDict(data, [n])


@pytest.fixture
def torchrl_calls(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Counts the calls of TorchRL's own ``TD3Loss.actor_loss`` and ``value_loss``."""
    calls: Counter = Counter()
    for name in ("actor_loss", "value_loss"):
        original = getattr(TD3Loss, name)

        def spy(self, tensordict, original=original, name=name):
            calls[name] += 1
            return original(self, tensordict)

        monkeypatch.setattr(TD3Loss, name, spy)
    return calls


def train(
    loss_class: type, nets: ActorCritic, batches: list[TensorDict], policy_delay: int, **kwargs
) -> tuple[nn.Module, list[TensorDict], list[torch.Tensor]]:
    """``loss_class``, delayed as rlrun builds TD3, trained on ``batches`` through rlrun's
    update step; returns the loss, each step's output and the priorities written back."""
    nets = copy.deepcopy(nets)
    torch.manual_seed(1)  # TorchRL draws the second critic's initial weights
    loss = with_delayed_actor(loss_class, skips_actor=True)(
        nets.actor, nets.qvalue, action_spec=ACTION, policy_delay=policy_delay, **kwargs
    )
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.99)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2, fused=True)
    step = UpdateStep(
        loss, optimizer, 1.0, torch.device("cpu"), target_updater=DelayedSoftUpdate(loss, tau=0.5)
    )
    trainer = type("T", (), {"_post_loss_hook": lambda self, batch: None})()
    torch.manual_seed(2)  # the same target smoothing noise
    outs, priorities = [], []
    for b in batches:
        b = b.clone()
        outs.append(step.step(trainer, b))
        priorities.append(b.get("td_error"))
    return loss, outs, priorities


def assert_same(
    reference: tuple[nn.Module, list[TensorDict], list[torch.Tensor]],
    tensors: tuple[nn.Module, list[TensorDict], list[torch.Tensor]],
) -> None:
    """Every step's terms and logged values, priorities, the trained weights and targets, and
    the last step's gradients, equal to float32 rounding."""
    (ref_loss, ref_outs, ref_priorities), (loss, outs, priorities) = reference, tensors
    for i, (ref_out, out) in enumerate(zip(ref_outs, outs, strict=True)):
        assert set(out.keys()) == set(ref_out.keys())
        for key, value in ref_out.items():
            same(out.get(key), value, (i, key))
    for ref, got in zip(ref_priorities, priorities, strict=True):
        same(got, ref, "td_error")
    state, ref_state = loss.state_dict(), ref_loss.state_dict()
    assert state.keys() == ref_state.keys()
    for key, value in ref_state.items():
        same(state[key], value, key)
    grads = [
        (p.grad, q.grad) for p, q in zip(ref_loss.parameters(), loss.parameters(), strict=True)
    ]
    assert any(ref is not None for ref, _ in grads)
    for ref, got in grads:
        assert (ref is None) == (got is None)
        if ref is not None:
            same(got, ref, "grad")


def same(got: torch.Tensor, expected: torch.Tensor, what: object) -> None:
    """Within 1e-5 relative or 1e-5 of the tensor's largest magnitude: the critics round
    otherwise than TorchRL's vmap (a few 1e-7), which Adam's steps carry into the weights."""
    atol = 1e-6 + 1e-5 * float(expected.abs().max())
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=atol, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize(
    ("policy_delay", "loss_function", "noise", "critics"),
    # noise 1: target actions clamped to the bounds
    [(2, "l2", 0.2, 2), (3, "smooth_l1", 1.0, 3)],
)
def test_tensor_path_trains_as_torchrl(
    policy_delay: int, loss_function: str, noise: float, critics: int, torchrl_calls: Counter
) -> None:
    torch.manual_seed(0)
    nets = make_deterministic_actor_q(
        observation_spec=OBS, action_spec=ACTION, hidden_sizes=[32, 32]
    )
    batches = [batch() for _ in range(7)]
    kwargs = {
        "loss_function": loss_function,
        "policy_noise": noise,
        "noise_clip": 2 * noise,
        "num_qvalue_nets": critics,
    }
    reference = train(TD3Loss, nets, batches, policy_delay, **kwargs)
    assert torchrl_calls["value_loss"] == 7 and torchrl_calls["actor_loss"] >= 7 // policy_delay
    torchrl_calls.clear()
    tensors = train(TensorTD3Loss, nets, batches, policy_delay, **kwargs)
    assert tensors[0].direct and not torchrl_calls  # the tensor path, every step
    assert_same(reference, tensors)
    # the steps trained: the actor moved, the targets followed it
    assert not torch.equal(tensors[1][0]["loss_actor"], tensors[1][-1]["loss_actor"])


def test_priority_weights_take_torchrl_path(torchrl_calls: Counter) -> None:
    """A prioritized replay's weights: TorchRL's own terms (weighted means), the same as its
    loss's."""
    torch.manual_seed(0)
    nets = make_deterministic_actor_q(observation_spec=OBS, action_spec=ACTION, hidden_sizes=[32])
    batches = [batch(weighted=True) for _ in range(4)]
    reference = train(TD3Loss, nets, batches, 2)
    torchrl_calls.clear()
    tensors = train(TensorTD3Loss, nets, batches, 2)
    assert tensors[0].direct and torchrl_calls["value_loss"] == 4
    assert_same(reference, tensors)


def test_other_networks_take_torchrl_path(torchrl_calls: Counter) -> None:
    """A Q network the tensor path does not know (not an MLP) trains on TorchRL's terms."""
    torch.manual_seed(0)
    nets = make_deterministic_actor_q(observation_spec=OBS, action_spec=ACTION, hidden_sizes=[16])
    bilinear = nn.Bilinear(5, 3, 1)
    nets = ActorCritic(
        actor=nets.actor,
        qvalue=TensorDictModule(bilinear, ["observation", "action"], ["state_action_value"]),
    )
    batches = [batch() for _ in range(3)]
    reference = train(TD3Loss, nets, batches, 2)
    tensors = train(TensorTD3Loss, nets, batches, 2)
    assert not tensors[0].direct and torchrl_calls["value_loss"] == 6
    assert_same(reference, tensors)
