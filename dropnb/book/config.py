"""Run configuration of a chapter: profile, seeds, device, threads and dtypes.

A chapter starts with a ``parameters`` cell (``profile = None``, ``seed = None``) that papermill
may override, and then calls :func:`dropnb.setup`. ``None`` reads the environment:
``$DROPNB_PROFILE`` (default ``book``) and ``$DROPNB_SEED`` (default: the chapter's own seed).
The profile chooses problem sizes, never claims:

========  ===================  ====================================
profile   used for             budget
========  ===================  ====================================
quick     tests and CI         under a minute a chapter, two cores
book      the rendered book    under three minutes a chapter
full      paper scale          under ten minutes a chapter, one GPU
========  ===================  ====================================

numpy, torch and threadpoolctl are imported inside the functions that use them, so that what only
needs the profiles (the runner, the Sphinx extension) loads without them.
"""

from __future__ import annotations

import os
import platform
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from .. import checks
from .layout import PROFILES
from .threads import threads_from_environment

if TYPE_CHECKING:
    import numpy as np
    import torch

DEFAULT_PROFILE = "book"
PROFILE_VARIABLE = "DROPNB_PROFILE"
SEED_VARIABLE = "DROPNB_SEED"

T = TypeVar("T")


def resolve_profile(profile: str | None = None) -> str:
    """The profile: the argument if given, else ``$DROPNB_PROFILE``, else ``"book"``."""
    value = profile if profile is not None else os.environ.get(PROFILE_VARIABLE) or DEFAULT_PROFILE
    if value not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {value!r}")
    return value


def resolve_seed(seed: int | None, default: int) -> int:
    """The base seed: the argument if given, else ``$DROPNB_SEED``, else the chapter's ``default``."""
    default = checks.integer(default, "default", minimum=0)
    if seed is None:
        seed = checks.environment_integer(SEED_VARIABLE, default, minimum=0)
    return checks.integer(seed, "seed", minimum=0)


def default_device() -> torch.device:
    """CUDA when a GPU is visible, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _float64() -> torch.dtype:
    import torch

    return torch.float64


def stream_seed(seed: int, stream: str) -> list[int]:
    """Seed sequence of a named random stream: independent streams for independent experiments."""
    return [checks.integer(seed, "seed", minimum=0), zlib.crc32(checks.text(stream, "stream", empty=True).encode())]


@dataclass(frozen=True)
class Config:
    """Profile, base seed, device and dtype of one chapter run."""

    profile: str
    seed: int
    device: torch.device = field(default_factory=default_device)
    dtype: torch.dtype = field(default_factory=_float64)

    def __post_init__(self) -> None:
        resolve_profile(self.profile)
        stream_seed(self.seed, "")

    def pick(self, *, quick: T, book: T, full: T) -> T:
        """The value for this profile."""
        return {"quick": quick, "book": book, "full": full}[self.profile]

    def rng(self, stream: str) -> np.random.Generator:
        """A numpy generator for the named stream; the same name gives the same numbers."""
        import numpy as np

        return np.random.default_rng(stream_seed(self.seed, stream))

    def torch_generator(self, stream: str) -> torch.Generator:
        """A torch generator on this device for the named stream."""
        import numpy as np
        import torch

        generator = torch.Generator(device=self.device)
        generator.manual_seed(int(np.random.SeedSequence(stream_seed(self.seed, stream)).generate_state(1)[0]))
        return generator

    def describe(self) -> str:
        """One line naming profile, seed, device and library versions."""
        import numpy as np
        import torch

        device = self.device.type
        if device == "cuda":
            device = f"cuda ({torch.cuda.get_device_name(self.device)})"
        return (
            f"profile {self.profile}, seed {self.seed}, device {device}, "
            f"{torch.get_num_threads()} threads, Python {platform.python_version()}, "
            f"numpy {np.__version__}, torch {torch.__version__}"
        )


def configure_threads() -> int:
    """Set every loaded numeric library to ``$DROPNB_THREADS`` threads (default 1); return the count.

    torch through ``torch.set_num_threads``; numpy's and scipy's OpenBLAS and torch's OpenMP through
    threadpoolctl, since they may have started before the chapter imported dropnb.
    """
    import threadpoolctl
    import torch

    threads = threads_from_environment()
    torch.set_num_threads(threads)
    threadpoolctl.threadpool_limits(threads)
    return threads

