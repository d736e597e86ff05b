"""rlrun's actors (``rlrun/builders/policies.py``) against TorchRL's own ``forward``: an
exploring call that skips tensordict's module plumbing draws the same actions with the same
log-probabilities, writes the same keys, and every other call is TorchRL's.

Fast: tiny networks, no env.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import set_skip_existing
from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import OneHotCategorical, ProbabilisticActor, TanhNormal
from torchrl.modules.distributions.utils import sample_and_log_prob

from rlrun.builders.action_masks import MASK_KEY
from rlrun.builders.multiagent import team_actor
from rlrun.builders.policies import (
    CapturableTanhNormal,
    categorical_draw,
    make_actor_critic,
    make_stochastic_actor_q,
    tanh_normal_draw,
)

OBS = Composite(observation=Unbounded(shape=(5,)))
MASKED_OBS = Composite(
    observation=Unbounded(shape=(5,)), **{MASK_KEY: Categorical(2, shape=(4,), dtype=torch.bool)}
)
CONTINUOUS = Bounded(low=-2.0, high=torch.tensor([2.0, 1.0]), shape=(2,))
TEAM_OBS = Composite(agents=Composite(observation=Unbounded(shape=(3, 5)), shape=(3,)))


def actor(case: str):
    if case.startswith("team"):  # three agents, one network each (MAPPO's, IPPO's actors)
        spec = OneHot(4, shape=(3, 4)) if case == "team" else Bounded(-1.0, 1.0, shape=(3, 2))
        return team_actor(TEAM_OBS, spec, [8], "tanh", False, True, return_log_prob=True)
    if case == "sac":
        return make_stochastic_actor_q(
            observation_spec=OBS, action_spec=CONTINUOUS, hidden_sizes=[8]
        ).actor
    spec, obs, kwargs = {
        "one_hot": (OneHot(3), OBS, {}),
        "categorical": (Categorical(4), OBS, {}),
        "masked": (OneHot(4), MASKED_OBS, {}),
        "tanh_normal": (CONTINUOUS, OBS, {}),
        "state_independent_std": (CONTINUOUS, OBS, {"state_dependent_std": False}),
        "lstm": (OneHot(3), OBS, {"kind": "lstm", "hidden_size": 8}),
    }[case]
    return make_actor_critic(
        observation_spec=obs, action_spec=spec, hidden_sizes=[8], with_critic=False, **kwargs
    ).actor


def batch(n: int = 6) -> TensorDict:
    mask = torch.rand(n, 4) < 0.5
    mask[:, 0] = True  # at least one legal action
    return TensorDict(
        {
            "observation": torch.randn(n, 5),
            MASK_KEY: mask,
            "actor_h": torch.zeros(n, 1, 8),
            "actor_c": torch.zeros(n, 1, 8),
            "is_init": torch.ones(n, 1, dtype=torch.bool),
            ("agents", "observation"): torch.randn(n, 3, 5),
        },
        [n],
    )


def calls(module) -> list[int]:
    """A counter of ``module``'s calls (a forward pre-hook: the module itself is untouched)."""
    count = [0]
    module.register_forward_pre_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    return count


@pytest.mark.parametrize(
    "case",
    [
        "one_hot",
        "categorical",
        "masked",
        "tanh_normal",
        "state_independent_std",
        "sac",
        "team",
        "team_continuous",
    ],
)
@pytest.mark.parametrize("grad", [False, True])
def test_exploring_call_draws_as_torchrl(case: str, grad: bool) -> None:
    policy = actor(case)
    assert policy.direct
    drawn = calls(policy.module[-1])
    data = batch()
    with set_exploration_type(ExplorationType.RANDOM), torch.set_grad_enabled(grad):
        for seed in range(3):
            torch.manual_seed(seed)
            ours = policy(data.clone())
            assert drawn[0] == seed, "the exploring call went through TorchRL's modules"
            torch.manual_seed(seed)
            theirs = ProbabilisticActor.forward(policy, data.clone())
            assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
            for key in theirs.keys(True, True):
                assert torch.equal(ours[key], theirs[key]), key
                assert ours[key].requires_grad == theirs[key].requires_grad, key
    if grad:  # the log-probability (SAC's: the reparameterised action) carries the gradient
        draw = policy.module[-1]
        key = draw.log_prob_key if draw.return_log_prob else draw.dist_sample_keys[0]
        ours[key].sum().backward()
        assert all(p.grad is not None for p in policy.module[0].parameters())


@pytest.mark.parametrize("case", ["one_hot", "tanh_normal"])
def test_other_calls_are_torchrl(case: str) -> None:
    policy = actor(case)
    drawn = calls(policy.module[-1])
    data = batch()
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        policy(data.clone())  # evaluation: TorchRL's most likely action
    assert drawn[0] == 1
    with set_exploration_type(ExplorationType.RANDOM), set_skip_existing(True):
        filled = policy(data.clone())  # nothing written yet: runs
        assert drawn[0] == 2
        again = policy(filled.clone())  # every output there: TorchRL skips it
        assert drawn[0] == 2 and torch.equal(again["action"], filled["action"])
    out = policy(observation=data["observation"])  # keyword call: TorchRL's dispatch
    assert drawn[0] == 3 and isinstance(out, tuple)


def test_recurrent_actor_keeps_torchrl_path() -> None:
    policy = actor("lstm")
    assert not policy.direct  # a recurrent cell before the head: TorchRL's sequence
    drawn = calls(policy.module[-1])
    with set_exploration_type(ExplorationType.RANDOM):
        out = policy(batch())
    assert drawn[0] == 1 and out["action"].shape == (6, 3)


@pytest.mark.parametrize(
    ("low", "high"),
    [([-2.0], [2.0]), ([-1.0, -1.0], [1.0, 1.0]), ([-1.0, 0.0, -3.0], [2.0, 0.5, 3.0])],
    ids=["pendulum", "unit", "uneven"],
)
@pytest.mark.parametrize("cls", [TanhNormal, CapturableTanhNormal])
def test_tanh_normal_drawn_on_tensors_as_torchrls(low: list, high: list, cls: type) -> None:
    """SAC's loss draws its actor's actions with ``tanh_normal_draw``: seed for seed the action,
    log-probability and both parameters' gradients of ``TanhNormal.rsample_and_log_prob``, bit
    for bit, with unit bounds too (where TorchRL skips the affine map)."""
    low, high = torch.tensor(low), torch.tensor(high)
    torch.manual_seed(0)
    loc0, scale0 = torch.randn(256, len(low)) * 3, torch.rand(256, len(low)) + 0.05

    def torchrls(loc: torch.Tensor, scale: torch.Tensor) -> tuple:
        return cls(loc, scale, low=low, high=high).rsample_and_log_prob()

    def on_tensors(loc: torch.Tensor, scale: torch.Tensor) -> tuple:
        return tanh_normal_draw(loc, scale, low, high)

    results = []
    for draw in (torchrls, on_tensors):
        loc, scale = loc0.clone().requires_grad_(), scale0.clone().requires_grad_()
        torch.manual_seed(1)
        action, log_prob = draw(loc, scale)
        (action.sum() * 0.3 + log_prob.sum()).backward()
        results.append((action, log_prob, loc.grad, scale.grad))
    for theirs, ours in zip(*results, strict=True):
        assert torch.equal(theirs, ours)


@pytest.mark.parametrize("shape", [(3,), (256, 2), (6, 3, 4)], ids=["single", "batch", "team"])
@pytest.mark.parametrize("cls", [OneHotCategorical, torch.distributions.Categorical])
def test_categorical_drawn_on_tensors_as_torchrls(shape: tuple, cls: type) -> None:
    """PPO's and A2C's actors draw discrete actions with ``categorical_draw``: seed for seed
    the action and log-probability of TorchRL's ``sample_and_log_prob``, bit for bit, with
    impossible (-inf) and near-certain actions among them; its log-probability's gradient too."""
    torch.manual_seed(0)
    logits0 = torch.randn(shape) * 4
    logits0[..., 0] = -float("inf") if shape[-1] > 2 else logits0[..., 0]
    results = []
    for on_tensors in (False, True):
        logits = logits0.clone().requires_grad_()
        torch.manual_seed(1)
        if on_tensors:
            action, log_prob = categorical_draw(logits, one_hot=cls is OneHotCategorical)
        else:
            dist = cls(logits=logits)
            action, log_prob = sample_and_log_prob(dist, reparameterize=dist.has_rsample)
        log_prob.sum().backward()
        results.append((action, log_prob, logits.grad))
    for theirs, ours in zip(*results, strict=True):
        assert theirs.dtype == ours.dtype and torch.equal(theirs, ours)
    assert results[0][0].shape == (shape if cls is OneHotCategorical else shape[:-1])


@pytest.mark.parametrize("case", ["one_hot", "categorical", "team"])
def test_discrete_exploring_call_builds_no_distribution(case: str) -> None:
    policy = actor(case)
    draw = policy.module[-1]
    built = [0]
    get_dist = draw.get_dist
    draw.get_dist = lambda *args: built.__setitem__(0, built[0] + 1) or get_dist(*args)
    with set_exploration_type(ExplorationType.RANDOM):
        out = policy(batch())
    assert built[0] == 0 and out.get(draw.log_prob_key).shape == out.get(draw.in_keys[0]).shape[:-1]
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        policy(batch())  # the most likely action: TorchRL's distribution
    assert built[0] == 1
