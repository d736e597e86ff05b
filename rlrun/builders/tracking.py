"""Tracking servers (W&B, MLflow) and what a run does when one is out of reach.

At start, a logger's server is probed for :data:`PROBE_TIMEOUT_S` (:func:`reachable`); out of
reach, the run logs locally and says so in one line (``rlrun/builders/loggers.py``,
``rlrun/builders/mlflow_logger.py``), or stops in one line with ``logger.strict=true``
(:func:`stop_if_strict`). W&B credentials are looked up as ``wandb.init`` looks them up
(:func:`wandb_auth_problem`), so ``logger.mode=online`` without them is refused before anything
is built (``rlrun/validation.py``). Nothing here imports torch; wandb only when asked.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import urllib.error
import urllib.request

from omegaconf import DictConfig

from rlrun.errors import RunError

PROBE_TIMEOUT_S = 5.0  # for the whole probe, name resolution included


def reachable(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a server answers ``url`` within ``timeout_s``. Run in a thread left behind on
    timeout: name resolution (``getaddrinfo``) has no timeout of its own, and on a node without
    network it can take far longer than a connection."""
    answers: list[bool] = []
    probe = threading.Thread(
        target=lambda: answers.append(_answers(url, timeout_s)), name="rlrun-probe", daemon=True
    )
    probe.start()
    probe.join(timeout_s)
    return bool(answers) and answers[0]


def _answers(url: str, timeout_s: float) -> bool:
    """One HEAD request through the environment's proxies. Any HTTP status is an answer (a 401
    or 404 comes from a server), and so is a TLS handshake that failed: the library reports
    that itself, it is not the network."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s):
            return True
    except urllib.error.HTTPError:
        return True
    except urllib.error.URLError as err:
        return isinstance(err.reason, ssl.SSLError)
    except (OSError, http.client.HTTPException):  # a timeout or reset after connecting
        return False


def stop_if_strict(cfg: DictConfig, server: str) -> None:
    """With ``logger.strict=true`` a server out of reach at start stops the run; otherwise the
    caller logs locally and says so."""
    if cfg.strict:
        raise RunError(
            f"{server} not reachable within {PROBE_TIMEOUT_S:g} s and logger.strict=true: "
            "check the network or the server's address, or set logger.strict=false to log "
            "locally until it is back."
        )


def wandb_base_url() -> str:
    """The W&B server ``wandb.init`` would talk to: ``WANDB_BASE_URL``, wandb's settings files,
    else its default."""
    from wandb.sdk import wandb_setup

    return wandb_setup.singleton().settings.base_url


def wandb_auth_problem() -> str | None:
    """None when wandb finds credentials for its server where ``wandb.init`` looks for them
    (``WANDB_API_KEY``, ``WANDB_IDENTITY_TOKEN_FILE``, ``~/.netrc`` or ``$NETRC`` for that host,
    wandb's settings file), else what is wrong. Nothing is sent."""
    from wandb.errors import AuthenticationError
    from wandb.sdk.lib import wbauth

    host = wandb_base_url()
    try:
        found = wbauth.authenticate_session(
            host=host, source="rlrun", prompt=False, update_session=False
        )
    except AuthenticationError as err:
        return f"W&B credentials for {host} are not usable: {err}"
    return None if found else f"no W&B credentials for {host}"
