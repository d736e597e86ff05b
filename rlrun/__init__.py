"""rlrun: a config-driven experiment runner for reinforcement learning (Hydra + TorchRL)."""

__version__ = "0.1.0"
