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

from .claims import Claims, ClaimFailed
from .config import Config, configure_threads, default_device, resolve_profile
from .plotting import use_style

__all__ = ["Claims", "ClaimFailed", "Config", "setup"]


def setup(chapter: str, profile: str | None = None, seed: int = 0) -> tuple[Config, Claims]:
    """Start a chapter run: resolve the profile, set threads, dtype and figure style, open its claims.

    ``profile`` overrides ``$DROPNB_PROFILE`` (default ``book``). Prints one line describing the run.
    """
    import torch

    configure_threads()
    torch.set_default_dtype(torch.float64)
    use_style()
    config = Config(profile=resolve_profile(profile), seed=seed, device=default_device())
    claims = Claims(chapter, config.profile, device=config.device.type)
    print(config.describe())
    return config, claims
