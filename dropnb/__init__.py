"""dropnb: the shared helpers of the executable book *Dropout, derived*.

Modules by concept: :mod:`~dropnb.config` (profile, seeds, device), :mod:`~dropnb.claims`
(claims and errata), :mod:`~dropnb.masks` (dropout masks and their moments),
:mod:`~dropnb.linear` (the shallow linear network with dropout), :mod:`~dropnb.deep` (deep
linear networks with dropout on every hidden layer), :mod:`~dropnb.equalizer`
(equalizers and equalized factorizations), :mod:`~dropnb.shrinkage` (the closed-form global
optimum), :mod:`~dropnb.training` (batched dropout SGD and gradient descent),
:mod:`~dropnb.structured` (DropBlock: the spectral s-support norm and the closed-form
minimum), :mod:`~dropnb.dropconnect` (DropConnect's objective),
:mod:`~dropnb.optimize` (L-BFGS with error certificates), :mod:`~dropnb.stats`,
:mod:`~dropnb.data`, :mod:`~dropnb.plotting` (figure style).
"""

from __future__ import annotations

from . import threads

threads.set_defaults()  # before torch and scipy start their thread pools

from .claims import Claims, ClaimFailed  # noqa: E402
from .config import Config, configure_threads, default_device, resolve_profile, resolve_seed  # noqa: E402
from .plotting import use_style  # noqa: E402

__all__ = ["Claims", "ClaimFailed", "Config", "setup"]


def setup(chapter: str, profile: str | None = None, seed: int | None = None,
          default_seed: int = 0) -> tuple[Config, Claims]:
    """Start a chapter run: resolve profile and seed, set threads, dtype and figure style, open its claims.

    ``profile`` overrides ``$DROPNB_PROFILE`` (default ``book``); ``seed`` overrides ``$DROPNB_SEED``
    (default ``default_seed``, the chapter's own). Prints one line describing the run.
    """
    import torch

    configure_threads()
    torch.set_default_dtype(torch.float64)
    use_style()
    config = Config(profile=resolve_profile(profile), seed=resolve_seed(seed, default_seed), device=default_device())
    claims = Claims(chapter, config.profile, device=config.device.type, seed=config.seed)
    print(config.describe())
    return config, claims
