"""DQN's loss computed on tensors (``rlrun/builders/tensor_losses.py``) against TorchRL's own
``forward`` on the same batches: the same terms, priorities and trained weights, and TorchRL's
path wherever the batch asks for more than the plain math (priority weights).

Fast: tiny networks, a few optimisation steps, no env.
"""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict
from torch import nn
from torchrl.data import Categorical, Composite, OneHot, Unbounded
from torchrl.modules import QValueActor
from torchrl.objectives import DQNLoss, SoftUpdate, ValueEstimators

from rlrun.algorithms import dqn
from rlrun.builders.policies import make_qvalue_actor
from rlrun.builders.tensor_losses import batch_keys, plain_td0

OBS = Composite(observation=Unbounded(shape=(4,)))
KINDS = ("value_network_params", "target_value_network_params")


def dqn_batch(action_spec, n: int = 32) -> TensorDict:
    action = action_spec.rand((n,))
    return TensorDict(
        {
            "observation": torch.randn(n, 4),
            "action": action,
            ("next", "observation"): torch.randn(n, 4),
            ("next", "reward"): torch.randn(n, 1),
            ("next", "done"): torch.rand(n, 1) < 0.3,
            ("next", "terminated"): torch.rand(n, 1) < 0.2,
        },
        [n],
    )


def train_dqn(
    loss_class: type,
    spec,
    double_dqn: bool,
    batches: list[TensorDict],
    normed: bool = False,
    copied: bool = False,
):
    """Each batch's loss and priorities over a few Adam steps with soft target updates, and
    the trained weights. ``normed``: a Q network with a LayerNorm (not a plain MLP: its
    parameters swapped in); ``copied``: of a deep copy of the loss (its module holds copies
    of the parameters, not the loss's own)."""
    torch.manual_seed(0)
    if normed:
        net = nn.Sequential(nn.Linear(4, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 3))
        qvalue = QValueActor(net, in_keys=["observation"], spec=spec)
    else:
        qvalue = make_qvalue_actor(observation_spec=OBS, action_spec=spec, hidden_sizes=[16, 16])
        qvalue = qvalue.qvalue
    loss = loss_class(qvalue, delay_value=True, double_dqn=double_dqn)
    if copied:
        loss = copy.deepcopy(loss)
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.9)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
    target = SoftUpdate(loss, tau=0.5)
    terms, priorities = [], []
    for batch in batches:
        optimizer.zero_grad()
        out = loss(batch)
        out["loss"].backward()
        optimizer.step()
        target.step()
        terms.append(out["loss"].detach())
        priorities.append(batch["td_error"])
    return terms, priorities, loss.state_dict(), loss


@pytest.mark.parametrize(
    ("double_dqn", "normed", "copied"),
    [(True, False, False), (False, False, False), (True, True, True), (False, True, False)],
)
@pytest.mark.parametrize("spec", [OneHot(3), Categorical(3)], ids=["one_hot", "categorical"])
def test_dqn_on_tensors_trains_as_torchrls_loss(
    spec, double_dqn: bool, normed: bool, copied: bool
) -> None:
    batches = [dqn_batch(spec) for _ in range(5)]
    runs = [
        train_dqn(cls, spec, double_dqn, copy.deepcopy(batches), normed, copied)
        for cls in (DQNLoss, dqn.TensorDQNLoss)
    ]
    (terms, priorities, weights, _), (terms2, priorities2, weights2, tensor_loss) = runs
    assert tensor_loss.direct and plain_td0(tensor_loss, batches[0])  # the direct path ran
    assert bool(tensor_loss.q_weights.layers) is not normed  # a plain MLP read, else swapped in
    assert all(torch.equal(a, b) for a, b in zip(terms, terms2, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(priorities, priorities2, strict=True))
    for key, value in weights.items():
        assert torch.equal(value, weights2[key]), key
    online, target = (weights[f"{kind}.module.0.module.0.weight"] for kind in KINDS)
    assert not torch.equal(online, target)  # the targets lag: the next values are the target's


def test_dqn_with_priority_weights_takes_torchrls_path() -> None:
    """A prioritized replay sample's importance weights weigh the loss: TorchRL computes it."""
    batches = [dqn_batch(OneHot(3)) for _ in range(3)]
    for batch in batches:
        batch["priority_weight"] = torch.rand(32)
    _, _, _, tensor_loss = train_dqn(dqn.TensorDQNLoss, OneHot(3), True, batches[:0])
    assert not plain_td0(tensor_loss, batches[0])
    runs = [
        train_dqn(cls, OneHot(3), True, copy.deepcopy(batches))
        for cls in (DQNLoss, dqn.TensorDQNLoss)
    ]
    assert all(torch.equal(a, b) for a, b in zip(runs[0][0], runs[1][0], strict=True))
    unweighted = train_dqn(
        DQNLoss, OneHot(3), True, [b.exclude("priority_weight") for b in batches]
    )
    assert not torch.equal(unweighted[0][0], runs[1][0][0])


def test_dqn_with_an_action_mask_takes_torchrls_path() -> None:
    """The greedy head masks illegal actions: the direct path does not know masks."""
    masked = Composite(observation=Unbounded(shape=(4,)), action_mask=Categorical(2, shape=(3,)))
    ac = make_qvalue_actor(observation_spec=masked, action_spec=OneHot(3), hidden_sizes=[8])
    assert not dqn.TensorDQNLoss(ac.qvalue, delay_value=True).direct


def test_dqn_kept_weights_follow_a_copy_and_a_cast() -> None:
    """The tensor loss keeps its read of the plain MLP's weights from step to step: a deep copy
    of a loss that has trained, then the copy cast to float64 (new parameter tensors), train
    on their own tensors, as TorchRL's loss copied and cast at the same point."""
    spec = OneHot(3)
    batches = [dqn_batch(spec) for _ in range(9)]
    runs = [
        train_dqn(cls, spec, True, copy.deepcopy(batches[:3]))
        for cls in (DQNLoss, dqn.TensorDQNLoss)
    ]
    losses = [run[3] for run in runs]
    assert losses[1].q_weights.kept  # a read kept from the steps above
    for cast in (False, True):
        losses = [copy.deepcopy(loss) for loss in losses]
        if cast:
            losses = [loss.double() for loss in losses]
        terms = []
        for loss in losses:
            optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
            out = []
            for batch in copy.deepcopy(batches[3:6] if not cast else batches[6:]):
                if cast:
                    batch = batch.apply(lambda t: t.double() if t.is_floating_point() else t)
                optimizer.zero_grad()
                step = loss(batch)
                step["loss"].backward()
                optimizer.step()
                out.append(step["loss"].detach())
            terms.append(out)
        assert all(torch.equal(a, b) for a, b in zip(*terms, strict=True)), terms
        assert terms[1][0].dtype == (torch.float64 if cast else torch.float32)
    online = losses[1].value_network_params
    assert losses[1].q_weights(online)[0][0][0] is online.get(losses[1].q_weights.layers[0][0])


def test_a_fused_sample_gathers_what_the_loss_reads() -> None:
    """The fused replay sample's entries: rlrun's and TorchRL's losses' ``in_keys`` and the
    optional entries they act on; every entry for a loss class of a user's, even one derived
    from TorchRL's (its ``forward`` may read more than its ``in_keys``)."""

    class UsersLoss(DQNLoss):
        pass

    for cls in (DQNLoss, dqn.TensorDQNLoss, UsersLoss):
        loss = train_dqn(cls, OneHot(3), True, [])[3]
        keys = batch_keys(loss)
        if cls is UsersLoss:
            assert keys is None
        else:
            assert keys == [
                *loss.in_keys,
                ("collector", "mask"),
                "shifted_valid",
                "steps_to_next_obs",
            ]
