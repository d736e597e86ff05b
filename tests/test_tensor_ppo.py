"""rlrun's ``TensorPPOLoss`` against TorchRL's ``ClipPPOLoss`` (rlrun's capturable one): the same
networks and minibatches give the same loss terms, logged terms, gradients and trained weights,
bit for bit (the same operations on the same floats); losses and minibatches the direct path
does not cover take TorchRL's ``forward``.

Fast: tiny networks, a few optimisation steps, no env.
"""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import forward_calls
from tensordict import TensorDict
from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.objectives import ClipPPOLoss

from rlrun.algorithms import ppo
from rlrun.builders.action_masks import MASK_KEY
from rlrun.builders.policies import make_actor_critic
from rlrun.compat.torchrl import CapturablePPOLoss

OBS, BATCH = 5, 64
RLRUN = {  # the options rlrun's build passes
    "clip_epsilon": 0.2,
    "entropy_coeff": 0.01,
    "critic_coeff": 0.5,
    "normalize_advantage": True,
    "loss_critic_type": "l2",
}
SPECS = {
    "one_hot": OneHot(3),
    "categorical": Categorical(4),
    "masked": OneHot(4),
    "continuous": Bounded(low=-2.0, high=2.0, shape=(2,)),
    "state_independent_std": Bounded(low=-2.0, high=2.0, shape=(2,)),
    "lstm": OneHot(3),
}


@pytest.fixture
def torchrl_calls(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """The loss types whose forward reached TorchRL's ``ClipPPOLoss.forward`` (as
    ``CapturablePPOLoss.forward``: TorchRL's loss metaclass binds each class its own)."""
    return forward_calls(monkeypatch, CapturablePPOLoss)


def losses(case: str, copied: bool = False, **kwargs) -> list[ClipPPOLoss]:
    """TorchRL's loss and rlrun's on copies of the same actor and critic; ``copied``: rlrun's a
    deep copy (its modules then hold copies of its parameters, not its own)."""
    torch.manual_seed(0)
    spec = SPECS[case]
    obs = {"observation": Unbounded(shape=(OBS,))}
    if case == "masked":
        obs[MASK_KEY] = Categorical(2, shape=(4,), dtype=torch.bool)
    ac = make_actor_critic(
        observation_spec=Composite(obs),
        action_spec=spec,
        hidden_sizes=[16, 16],
        state_dependent_std=case != "state_independent_std",
        **({"kind": "lstm", "hidden_size": 8} if case == "lstm" else {}),
    )
    options = {**RLRUN, **kwargs}
    reference = CapturablePPOLoss(copy.deepcopy(ac.actor), copy.deepcopy(ac.critic), **options)
    tensor = ppo.__getattr__("TensorPPOLoss")(ac.actor, ac.critic, **options)
    return [reference, copy.deepcopy(tensor) if copied else tensor]


def batch(case: str, seed: int, extra: dict | None = None) -> TensorDict:
    """A minibatch as GAE leaves it: advantages, value targets, and collected log-probs drawn
    at random (the ratios spread, some clipped: each step of the training test checks one
    is)."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(BATCH, 4, generator=g) < 0.6
    mask[:, 1] = True  # a legal action in every state
    spec = SPECS[case]
    if case == "masked":  # a legal action, as the collector drew
        action = torch.nn.functional.one_hot(
            torch.multinomial(mask.float(), 1, generator=g)[:, 0], 4
        )
    else:
        torch.manual_seed(seed)
        action = spec.rand((BATCH,))
        if case in ("one_hot", "categorical"):
            action = action.long()  # the env's one-hot actions are integers
        else:  # inside the bounds, where TanhNormal's log-probability is finite
            action = action.clamp(-1.9, 1.9)
    done = torch.rand(BATCH, 1, generator=g) < 0.1
    return TensorDict(
        {
            "observation": torch.randn(BATCH, OBS, generator=g),
            MASK_KEY: mask,
            "action": action,
            "action_log_prob": -torch.rand(BATCH, generator=g)
            - 0.4 * torch.rand(BATCH, generator=g),
            "advantage": torch.randn(BATCH, 1, generator=g),
            "value_target": torch.randn(BATCH, 1, generator=g),
            ("next", "observation"): torch.randn(BATCH, OBS, generator=g),
            ("next", "reward"): torch.randn(BATCH, 1, generator=g),
            ("next", "done"): done,
            ("next", "terminated"): done.clone(),
            **(extra or {}),
        },
        [BATCH],
    )


def train(loss: ClipPPOLoss, batches: list[TensorDict]) -> tuple[list, list, dict]:
    """Adam steps on ``batches`` as rlrun's update takes them (loss terms summed, gradient
    clipping): each step's terms and gradients, and the weights after."""
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
    outs, grads = [], []
    for i, data in enumerate(batches):
        optimizer.zero_grad(set_to_none=True)
        torch.manual_seed(100 + i)  # a TanhNormal's entropy is sampled
        out = loss(data.clone())
        sum(v for k, v in out.items() if k.startswith("loss")).backward()
        grads.append({name: p.grad.clone() for name, p in loss.named_parameters()})
        torch.nn.utils.clip_grad_norm_(list(loss.parameters()), 0.5)
        optimizer.step()
        outs.append(out.detach())
    return outs, grads, loss.state_dict()


def assert_same(expected: dict, actual: dict, what: str) -> None:
    assert list(expected.keys()) == list(actual.keys()), what
    for key, value in expected.items():
        assert torch.equal(value, actual[key]), f"{what}: {key}"


@pytest.mark.parametrize(
    "case, kwargs",
    [
        ("one_hot", {}),
        ("categorical", {"normalize_advantage": False, "loss_critic_type": "smooth_l1"}),
        ("masked", {}),
        ("one_hot", {"entropy_bonus": False, "log_explained_variance": False}),
        ("continuous", {}),
        ("state_independent_std", {"entropy_coeff": 0.0}),
        ("state_independent_std", {"copied": True}),
    ],
    ids=[
        "one_hot",
        "categorical-smooth_l1",
        "masked",
        "no_entropy",
        "tanh_normal",
        "state_independent_std",
        "state_independent_std-copied",
    ],
)
def test_same_training_as_torchrl(case: str, kwargs: dict, torchrl_calls: list[type]) -> None:
    """Five steps of each loss on its own: the same terms, gradients and weights."""
    reference, tensor = losses(case, **kwargs)
    assert tensor.direct
    initial = copy.deepcopy(reference.state_dict())
    batches = [batch(case, i) for i in range(5)]
    (outs, grads, weights), (outs2, grads2, weights2) = (
        train(loss, batches) for loss in (reference, tensor)
    )
    for i in range(5):
        assert_same(outs[i], outs2[i], f"step {i}")
        assert_same(grads[i], grads2[i], f"step {i} gradient")
        assert outs[i]["clip_fraction"] > 0, "no ratio clipped: the check would miss the clip"
    assert_same(weights, weights2, "after the steps")
    assert not any(torch.equal(w, initial[k]) for k, w in weights.items() if "params" in k)
    assert torchrl_calls == [CapturablePPOLoss] * 5


def test_loss_mask_reduces_as_torchrl(torchrl_calls: list[type]) -> None:
    """A minibatch marking steps invalid (``("collector", "mask")``): TorchRL's reduction over
    the valid ones, on the direct path too."""
    keep = torch.rand(BATCH, generator=torch.Generator().manual_seed(3)) < 0.7
    outs = [train(loss, [batch("one_hot", 0, {("collector", "mask"): keep})])[0][0]
            for loss in losses("one_hot")]  # fmt: skip
    assert_same(*outs, "masked minibatch")
    assert torchrl_calls == [CapturablePPOLoss]


def test_other_losses_and_minibatches_take_torchrl_path(torchrl_calls: list[type]) -> None:
    """No advantage in the minibatch (TorchRL's loss computes it), a recurrent actor, value
    clipping, capped importance ratios: TorchRL's ``forward``, its terms."""
    tensor_class = ppo.__getattr__("TensorPPOLoss")
    reference, tensor = losses("one_hot")
    data = batch("one_hot", 0).exclude("advantage")
    assert_same(reference(data.clone()), tensor(data.clone()), "no advantage")
    assert torchrl_calls == [CapturablePPOLoss, tensor_class]
    assert not losses("lstm")[1].direct
    assert not losses("one_hot", clip_value=0.2)[1].direct
    assert not losses("one_hot", max_importance_ratio=2.0)[1].direct
