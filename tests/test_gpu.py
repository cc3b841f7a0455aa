"""On a GPU, the training loops never make the host wait for the device inside a step.

CUDA's synchronization debug mode warns at every call that waits for the device (a tensor read as a
Python bool or number, a boolean mask, a copy to the host). Each loop below runs twice, for T and for
2T steps with the same checkpoints: the waits must not grow with the steps (those at the checkpoints
and at the start stay). Without CUDA the tests skip (``benchmarks/gpu.sh`` runs them on a GPU machine).
"""

import math
import warnings

import numpy as np
import pytest
import torch

from dropnb import adversarial, relu_lazy
from dropnb.engine import Schedule, train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def waits(run) -> int:
    """How many times ``run()`` made the host wait for the device."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def draws(runs: int, dim: int, generator: torch.Generator):
    """A data source that reads nothing back: x uniform on the sphere, y the sign of x₁ (no rejection)."""
    def sample(count: int):
        x = torch.randn((count, runs, dim), generator=generator, device="cuda", dtype=torch.float64)
        x = x / x.norm(dim=-1, keepdim=True)
        return x, torch.where(x[..., 0] >= 0, 1.0, -1.0).to(x.dtype)

    return sample


def steps_do_not_wait(loop) -> None:
    short, long = waits(lambda: loop(40)), waits(lambda: loop(80))
    assert long == short, f"{short} waits for 40 steps, {long} for 80: the loop waits inside a step"


def test_train_waits_only_at_checkpoints():
    A = torch.randn((3, 4, 4), dtype=torch.float64, device="cuda")

    def loop(steps):
        train(dict(w=torch.zeros((3, 4), dtype=torch.float64, device="cuda")),
              lambda state, _: ((torch.einsum("rij,rj->ri", A, state["w"]) - 1) ** 2).sum(-1),
              Schedule.constant(0.01, steps), checkpoints=[0, steps], progress=False)

    steps_do_not_wait(loop)


def test_algorithm_4_waits_only_at_checkpoints():
    generator = torch.Generator("cuda").manual_seed(0)
    runs, width, dim = 4, 64, 5
    W1 = torch.randn((runs, width, dim), generator=generator, device="cuda", dtype=torch.float64)
    a = torch.where(torch.rand((runs, width), generator=generator, device="cuda") < 0.5, -1.0, 1.0).double()
    radius = float(W1.norm(dim=-1).max()) + 0.01  # rows leave the ball: the projection runs

    def loop(steps):
        relu_lazy.dropout_sgd(draws(runs, dim, generator), W1, a, 0.5, math.log(2), radius, steps, generator,
                             checkpoints=[0, steps], block=steps, dtype=torch.float64, progress=False)

    steps_do_not_wait(loop)


def test_algorithm_6_waits_only_at_checkpoints():
    generator = torch.Generator("cuda").manual_seed(0)
    runs, width, dim = 3, 32, 5
    W1 = torch.randn((runs, width, dim), generator=generator, device="cuda", dtype=torch.float64) / math.sqrt(dim)
    a = torch.where(torch.rand((runs, width), generator=generator, device="cuda") < 0.5, -1.0, 1.0).double()

    def loop(steps):
        adversarial.adversarial_training(draws(runs, dim, generator), W1, a, 0.5, 0.1, 0.1, steps, generator,
                                         attack_steps=5, accuracy=0.5, checkpoints=[0, steps], dtype=torch.float64,
                                         progress=False)

    steps_do_not_wait(loop)


def test_pgd_waits_only_before_its_loop():
    generator = torch.Generator("cuda").manual_seed(0)
    W = torch.randn((2, 16, 4), generator=generator, device="cuda", dtype=torch.float64)
    a = torch.ones((2, 16), device="cuda", dtype=torch.float64)
    x = torch.randn((2, 3, 4), generator=generator, device="cuda", dtype=torch.float64)
    y = torch.ones((2, 3), device="cuda", dtype=torch.float64)
    steps_do_not_wait(lambda steps: adversarial.pgd_attack(W, a, x, y, 0.5, 0.3, 0.1, np.array([steps, steps // 2])))
