"""DQN (``algo=dqn``): TorchRL's ``DQNLoss`` (double DQN by default), computed on tensors where
the batch allows (:class:`TensorDQNLoss`), epsilon-greedy exploration annealed over frames, hard
or soft target updates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import DISCRETE, Algorithm, Auto, defined_on_first_use
from rlrun.config import EpsilonGreedyConfig, RegressionLoss

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class DQNConfig(EpsilonGreedyConfig):
    """DQN's keys (``conf/algo/dqn.yaml``)."""

    loss_function: RegressionLoss = MISSING
    double_dqn: bool = MISSING


def _tensor_dqn_loss() -> type:
    """:class:`TensorDQNLoss`, made on first use (its base is TorchRL's ``DQNLoss``)."""
    import torch
    from tensordict import TensorDict, TensorDictBase
    from tensordict.nn import TensorDictModule, TensorDictSequential
    from torchrl.modules import QValueModule
    from torchrl.objectives import DQNLoss
    from torchrl.objectives.utils import distance_loss

    from rlrun.builders.tensor_losses import (
        Weights,
        mlp_layers,
        network_outputs,
        plain_td0,
        td0_target,
    )

    class TensorDQNLoss(DQNLoss):
        """TorchRL's ``DQNLoss``, its terms computed straight on the batch's tensors
        (``rlrun/builders/tensor_losses.py``) where the Q network is a plain one (a network
        of action values behind TorchRL's greedy head, no action mask) and the batch a plain
        one; TorchRL's ``forward`` otherwise. Same loss, priorities and gradients, bitwise (a
        test compares them on the same batches); ``+experiment=dqn`` on the CPU made 765
        update steps/s against 587 with TorchRL's ``forward`` (``python
        bench/bench_devices.py --only dqn``, 2 cores, 2026-12-06)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            network = self.value_network
            self.direct = (
                isinstance(network, TensorDictSequential)
                and len(network.module) == 2
                and type(network.module[0]) is TensorDictModule
                and network.module[0].out_keys == [self.tensor_keys.action_value]
                and type(network.module[1]) is QValueModule
                and network.module[1].action_mask_key is None
            )
            self.q_weights = Weights(  # a plain MLP's layers, read from the parameters
                mlp_layers(
                    network.module[0],
                    ("module", "0", "module"),
                    self.value_network_params,
                    self.target_value_network_params,
                )
                if self.direct
                else []
            )

        def forward(self, tensordict: TensorDictBase) -> TensorDict:
            if not self.direct or not plain_td0(self, tensordict):
                return super().forward(tensordict)
            action = tensordict.get(self.tensor_keys.action)
            online = self.q_weights(self.value_network_params)  # used twice
            pred_val = self.q_values(online, tensordict)
            if self.action_space == "categorical":
                if action.ndim != pred_val.ndim:
                    action = action.unsqueeze(-1)
                pred_val_index = torch.gather(pred_val, -1, index=action).squeeze(-1)
            else:
                pred_val_index = (pred_val * action.to(torch.float)).sum(-1)
            with torch.no_grad():
                target = self.q_weights(self.target_value_network_params)
                next_pred_val = self.q_values(target, tensordict, True)
                if self.double_dqn:  # the online network picks, the target network values
                    best = self.q_values(online, tensordict, True).argmax(-1, keepdim=True)
                    next_value = next_pred_val.gather(-1, best)
                else:
                    next_value = next_pred_val.max(-1, keepdim=True).values
                target_value = td0_target(self, tensordict, next_value).squeeze(-1)
                priority = (pred_val_index - target_value).pow(2).unsqueeze(-1)
            tensordict.set(self.tensor_keys.priority, priority, inplace=True)
            loss = distance_loss(pred_val_index, target_value, self.loss_function).mean()
            return TensorDict(loss=loss)

        def q_values(
            self, weights: list | TensorDictBase, batch: TensorDictBase, next_state: bool = False
        ) -> torch.Tensor:
            """The action values of the states (``next_state``: the next ones) with
            ``weights`` (``q_weights``: the loss's or the target's)."""
            prefix = ("next",) if next_state else ()
            head = self.value_network.module[0]
            return network_outputs(head, weights, self.value_network, batch, prefix)[0]

    return TensorDQNLoss


__getattr__ = defined_on_first_use(__name__, TensorDQNLoss=_tensor_dqn_loss)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """DQN on ``ac.qvalue``; the collector acts epsilon-greedily."""
    from rlrun.builders.offpolicy import epsilon_greedy, hard_or_soft, off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    loss = __getattr__("TensorDQNLoss")(
        ctx.ac.qvalue, loss_function=cfg.loss_function, delay_value=True, double_dqn=cfg.double_dqn
    )
    exploration = epsilon_greedy(cfg, ctx.ac, ctx.device)
    updater = hard_or_soft(cfg, loss)
    return off_policy(cfg, loss, ctx.frames_per_batch, updater=updater, exploration=exploration)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_qvalue_actor",
    summary="Deep Q-network (double DQN), epsilon-greedy, hard or soft target updates",
    schema=DQNConfig,
    actions=(DISCRETE,),
    ray_learners=True,
    cudagraphs=True,
    # compiled on the CPU (2026-12-06, 2 cores, +experiment=dqn, the loss on tensors): steady
    # 1668-1704 frames/s against 1546-1569 eager (0.11 ms a step saved) after 11.5 s of
    # compiling (3.0 s from a warm cache): pays from about 110k steps; on CUDA not measured
    auto={"cpu": Auto(compile=True, min_steps=120_000)},
)
