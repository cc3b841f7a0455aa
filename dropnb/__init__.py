"""dropnb: the shared helpers of the executable book *Dropout, derived*.

The top-level modules are the mathematics, by concept; running, judging and rendering the book is
everything under :mod:`dropnb.book`, which imports no mathematical module but :mod:`~dropnb.checks`
(and no mathematical module imports it). Only :func:`setup` below, which starts a page run, uses both.

* masks and shallow networks: :mod:`~dropnb.masks` (dropout masks and their moments),
  :mod:`~dropnb.linear` (the shallow linear network with dropout and its training by Algorithm 1),
  :mod:`~dropnb.equalizer` (equalizers), :mod:`~dropnb.shrinkage` (the closed-form global optimum),
  :mod:`~dropnb.dropconnect` (DropConnect's objective and DropConnect SGD);
* deeper and structured models: :mod:`~dropnb.deep` (deep linear networks and their dropout training),
  :mod:`~dropnb.structured` (DropBlock and the spectral s-support norm), :mod:`~dropnb.features`
  (a feature extractor with DropBlock on the digits);
* landscapes: :mod:`~dropnb.landscape` (gradients, Hessians and critical points of the dropout
  objectives), :mod:`~dropnb.networks` (critical points of linear networks),
  :mod:`~dropnb.factorization` (matrix factorization with weight decay of variable width),
  :mod:`~dropnb.relu_decay` (the two-layer ReLU network with weight decay, a sum of positively
  homogeneous subnetworks: its descent and flat paths), :mod:`~dropnb.relu_polar` (its polar, the
  duality-gap certificates, the convex reference and the meta-algorithm);
* capacity: :mod:`~dropnb.sensing` (matrix sensing and completion with dropout, the weighted trace
  norm and its Rademacher complexity, dropout SGD for completion), :mod:`~dropnb.relu_capacity`
  (two-layer ReLU networks: the dropout regularizer, retentivity, exact Rademacher complexities in
  the plane, co-adaptation, their dropout training);
* training dynamics: :mod:`~dropnb.relu_lazy` (dropout training of two-layer ReLU networks in the
  lazy regime: Algorithm 4, dropout SGD of k-class classifiers, the certified NTK margin in the
  plane, the convergence theorems' constants), :mod:`~dropnb.adversarial` (adversarial training of two-layer leaky-ReLU networks
  with the reflected loss: Algorithms 5 and 6, exact worst cases, the multi-class toys),
  :mod:`~dropnb.classifiers` (two-layer image classifiers, MLP and CNN batched over runs: their PGD
  attacks and their standard or adversarial training);
* numerics: :mod:`~dropnb.engine` (the training engine: schedules, the descent loop, autograd
  training on any device; each model's training loops live beside it, on the engine),
  :mod:`~dropnb.optimize` (L-BFGS
  with error certificates), :mod:`~dropnb.stats` (Monte-Carlo estimates and tests),
  :mod:`~dropnb.data` (synthetic and bundled data), :mod:`~dropnb.datasets` (MovieLens-100K and
  MNIST from pinned wheels), :mod:`~dropnb.rounding` (rounding bounds and their operation counts),
  :mod:`~dropnb.checks` (argument validators, one error format).
"""

from __future__ import annotations

from .book import threads

threads.set_defaults()  # before torch and scipy start their thread pools

from .book.claims import Claims, ClaimFailed  # noqa: E402
from .book.config import Config, configure_threads, default_device, resolve_profile, resolve_seed  # noqa: E402
from .book.plotting import use_style  # noqa: E402
from .book.render import show_numpy_scalars_plainly  # noqa: E402

__all__ = ["Claims", "ClaimFailed", "Config", "setup"]


def setup(page: str, profile: str | None = None, seed: int | None = None,
          default_seed: int = 0, prefix: str | None = None) -> tuple[Config, Claims]:
    """Start a page run: resolve profile and seed, set threads, dtype, figure style and the display of
    NumPy scalars, open its claims.

    ``page`` is the page's name (file stem), ``prefix`` the start of its claim ids (default: the
    page's name; the pages of a split chapter share the chapter's prefix, see :class:`Claims`).
    ``profile`` overrides ``$DROPNB_PROFILE`` (default ``book``); ``seed`` overrides ``$DROPNB_SEED``
    (default ``default_seed``, the page's own). Prints one line describing the run.
    """
    import torch

    configure_threads()
    torch.set_default_dtype(torch.float64)
    use_style()
    show_numpy_scalars_plainly()
    config = Config(profile=resolve_profile(profile), seed=resolve_seed(seed, default_seed), device=default_device())
    claims = Claims(page, config.profile, device=config.device.type, seed=config.seed, prefix=prefix,
                    restart=True)
    print(config.describe())
    return config, claims
