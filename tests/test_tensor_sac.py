"""rlrun's ``TensorSACLoss`` against TorchRL's ``SACLoss``: the same networks, batches and random
draws give the same loss terms, priorities, gradients and weights over several optimisation
steps; batches or losses the direct path does not cover take TorchRL's ``forward``.

Bit for bit where the two compute the same operations: the actions drawn, their log-probabilities
and what follows from them alone (temperature, its loss and gradient, entropy). The critics' Q
values are one plain MLP call per critic in rlrun's loss (the bias added inside the matmul) and a
vmapped matmul then bias add in TorchRL's: they differ in the last bits, and so does everything
downstream of them (critic and actor terms, priorities, gradients; a few 1e-7 relative), which
is compared with ``assert_near``."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import forward_calls
from tensordict import TensorDict
from torchrl.data import Bounded, Composite, Unbounded
from torchrl.objectives import SACLoss, SoftUpdate, ValueEstimators

from rlrun.algorithms import sac
from rlrun.builders.policies import make_stochastic_actor_q

OBS, ACT, BATCH = 5, 2, 64


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: the networks are small, and with another job on the 2 cores a second
    thread made these steps some 30 times slower (2026-12-06)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def torchrl_calls(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """The loss types whose forward reached TorchRL's ``SACLoss.forward``."""
    return forward_calls(monkeypatch, SACLoss)


def losses(**kwargs) -> list[tuple[SACLoss, SoftUpdate]]:
    """TorchRL's loss and rlrun's on copies of the same networks, with the same critics (TorchRL
    draws their initial weights: the same seed before each), each with its soft target update."""
    torch.manual_seed(0)
    ac = make_stochastic_actor_q(
        observation_spec=Composite(observation=Unbounded(shape=(OBS,))),
        action_spec=Bounded(low=-2.0, high=2.0, shape=(ACT,)),
    )
    made = []
    for cls, nets in ((SACLoss, ac), (sac.__getattr__("TensorSACLoss"), copy.deepcopy(ac))):
        torch.manual_seed(1)
        loss = cls(nets.actor, nets.qvalue, delay_qvalue=True, target_entropy=-float(ACT), **kwargs)
        loss.make_value_estimator(ValueEstimators.TD0, gamma=0.99)
        made.append((loss, SoftUpdate(loss, tau=0.05)))
    (reference, _), (tensor, _) = made
    assert tensor.direct and tensor.tanh_normal  # its actor's draws on tensors too
    assert_same(reference.state_dict(), tensor.state_dict())
    return made


def batch(seed: int, **extra: torch.Tensor) -> TensorDict:
    """A replay sample, a quarter of it at terminal states."""
    g = torch.Generator().manual_seed(seed)
    terminated = torch.rand(BATCH, 1, generator=g) < 0.25
    return TensorDict(
        {
            "observation": torch.randn(BATCH, OBS, generator=g),
            "action": torch.rand(BATCH, ACT, generator=g) * 4 - 2,
            ("next", "observation"): torch.randn(BATCH, OBS, generator=g),
            ("next", "reward"): torch.randn(BATCH, 1, generator=g),
            ("next", "done"): terminated.clone(),
            ("next", "terminated"): terminated,
            **extra,
        },
        [BATCH],
    )


def assert_same(expected, actual, what: str = "") -> None:
    """Bit for bit: the same operations on the same floats."""
    assert list(expected.keys()) == list(actual.keys()), what
    for key, value in expected.items():
        assert torch.equal(value, actual[key]), f"{what} {key}"


def assert_near(expected, actual, what: str = "") -> None:
    """Equal but for rounding: within 1e-5 relative, or 1e-5 of the tensor's largest
    magnitude (TorchRL's and rlrun's critics round differently: a few 1e-7 seen)."""
    assert list(expected.keys()) == list(actual.keys()), what
    for key, value in expected.items():
        atol = 1e-5 * float(value.abs().max()) + 1e-12
        torch.testing.assert_close(actual[key], value, rtol=1e-5, atol=atol, msg=f"{what} {key}")


def step(loss: SACLoss, data: TensorDict, seed: int, optimizer=None, updater=None) -> tuple:
    """One update step as rlrun's (loss, backward, clip, Adam, soft target update; the loss and
    backward only without ``optimizer``); the terms, the priorities and the gradients it
    used."""
    loss.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # the actions both losses draw
    out = loss(data)
    sum(v for k, v in out.items() if k.startswith("loss")).backward()
    grads = {name: p.grad.clone() for name, p in loss.named_parameters()}
    if optimizer is not None:
        torch.nn.utils.clip_grad_norm_(list(loss.parameters()), 1.0)
        optimizer.step()
        updater.step()
    return out.detach(), data["td_error"], grads


PARAMS = pytest.mark.parametrize(
    "kwargs",
    [
        {"loss_function": "l2", "alpha_init": 1.0},
        {"loss_function": "smooth_l1", "alpha_init": 0.5, "min_alpha": 0.1, "max_alpha": 2.0},
    ],
    ids=["l2", "smooth_l1-bounded_alpha"],
)
ACTOR_ONLY = ("alpha", "entropy", "loss_alpha")  # the draws and log-probabilities alone


@PARAMS
def test_same_terms_from_the_same_state(kwargs: dict, torchrl_calls: list[type]) -> None:
    """Five states along TorchRL's own training (Adam, soft target updates), rlrun's loss put
    in each before the step: the same draws (bit for bit: temperature, entropy, temperature
    loss and gradient), the same critic and actor terms, priorities and gradients; TorchRL's
    forward never called by rlrun's loss (the direct path taken)."""
    (reference, updater), (tensor, _) = losses(**kwargs)
    optimizer = torch.optim.Adam(reference.parameters(), lr=1e-3)
    for i in range(5):
        tensor.load_state_dict(reference.state_dict())
        data = batch(i)
        out, prio, grads = step(tensor, data.clone(), 100 + i)
        out_ref, prio_ref, grads_ref = step(reference, data.clone(), 100 + i, optimizer, updater)
        assert_same(out_ref.select(*ACTOR_ONLY), out.select(*ACTOR_ONLY), f"step {i}")
        assert torch.equal(grads_ref["log_alpha"], grads["log_alpha"]), f"step {i}"
        assert_near(out_ref, out, f"step {i}")
        assert_near({"td_error": prio_ref}, {"td_error": prio}, f"step {i}")
        assert_near(grads_ref, grads, f"step {i} gradient")
        assert out["loss_actor"] != 0 and out["loss_qvalue"] != 0
    assert torchrl_calls == [SACLoss] * 5


@PARAMS
def test_same_training_as_torchrl(kwargs: dict, torchrl_calls: list[type]) -> None:
    """Five update steps of each loss on its own (Adam, gradient clipping, soft target
    updates): the same terms at each step, the same weights (critics', targets', actor's,
    temperature's) after."""
    made = losses(**kwargs)
    (reference, _), (tensor, _) = made
    initial = [w.clone() for w in reference.parameters()]
    runs = [(loss, torch.optim.Adam(loss.parameters(), lr=1e-3), updater) for loss, updater in made]
    for i in range(5):
        data = batch(i)
        (out, prio, grads), (out2, prio2, grads2) = (
            step(loss, data.clone(), 100 + i, optimizer, updater)
            for loss, optimizer, updater in runs
        )
        assert_near(out, out2, f"step {i}")
        assert_near({"td_error": prio}, {"td_error": prio2}, f"step {i}")
        assert_near(grads, grads2, f"step {i} gradient")
    assert_near(reference.state_dict(), tensor.state_dict(), "after the steps")
    assert not any(w.equal(w0) for w, w0 in zip(reference.parameters(), initial, strict=True))
    assert torchrl_calls == [SACLoss] * 5


def test_priority_weights_take_torchrl_path(torchrl_calls: list[type]) -> None:
    """A prioritised sample (``priority_weight``) is TorchRL's to weigh: rlrun's loss hands it
    over, and gives TorchRL's terms."""
    weights = torch.rand(BATCH) + 0.5
    outs = []
    for loss, _ in losses(loss_function="l2"):
        torch.manual_seed(7)
        outs.append(loss(batch(0, priority_weight=weights)).detach())
    assert_same(*outs)
    assert torchrl_calls == [SACLoss, sac.__getattr__("TensorSACLoss")]


def test_skip_done_states_takes_torchrl_path(torchrl_calls: list[type]) -> None:
    """A loss that leaves terminal next states out is TorchRL's own throughout."""
    _, (tensor, _) = losses(loss_function="l2")
    tensor.skip_done_states = True
    tensor(batch(0))
    assert torchrl_calls == [sac.__getattr__("TensorSACLoss")]
