"""rlrun: a config-driven experiment runner for reinforcement learning (Hydra + TorchRL)."""

import time

__version__ = "0.1.0"
LAUNCHED_AT = time.time()  # for summary.json's time from launch to the first collected batch
