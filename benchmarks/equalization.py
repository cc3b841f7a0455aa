"""Benchmarks of the equalization chapter; prints its figures.

1. Dropout SGD (Algorithm 1) at the paper's Figure 3 sizes (M ∈ ℝ^{120×80}, r ∈ {20, 80}, 50 runs):
   the batched engine (`dropnb.linear.algorithm1`, all runs as one tensor program) against two
   straightforward per-run loops, one in torch and one in numpy.
2. With ``--figure3``: the wall time of all six Figure 3 configurations (50 runs, 10⁵ steps each, or
   ``--figure3-steps``) on the default device (a GPU when present), one batch per configuration
   against the three rates of a width fused into one batch.
3. The closed-form global optimum against L-BFGS at 120 × 80, r = 20: time and objective agreement.

Usage: python benchmarks/equalization.py [--steps N] [--figure3] [--figure3-steps N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from dropnb import data, linear, masks, optimize, shrinkage
from dropnb.book.config import configure_threads, default_device
from dropnb.engine import Schedule, log_checkpoints

D1, D2, RUNS = 120, 80, 50
LAMBDAS = (0.1, 0.5, 1.0)


def problem(width: int, runs: int, rng: np.random.Generator):
    M = data.matrix_with_spectrum(0.9 ** np.arange(D2), (D1, D2), rng)
    U0 = 0.5 / np.sqrt(D1) * rng.standard_normal((runs, D1, width))
    V0 = 0.5 / np.sqrt(D2) * rng.standard_normal((runs, D2, width))
    return M, U0, V0


def numpy_loop(M, U0, V0, retain, lr, steps, rng):
    """Algorithm 1 one run at a time, one sample at a time, in numpy."""
    for U, V in zip(U0.copy(), V0.copy()):
        for _ in range(steps):
            x = rng.standard_normal(D2)
            b = (rng.random(U.shape[1]) < retain).astype(float)
            hidden = b * (V.T @ x)
            error = U @ hidden / retain - M @ x
            back = b * (U.T @ error)
            U -= lr * np.outer(error, hidden)
            V -= lr * np.outer(x, back)


def per_step(seconds: float, steps: int) -> float:
    return 1e6 * seconds / steps


def engine(steps: int) -> None:
    print(f"1. Algorithm 1 at {D1}×{D2}, {RUNS} runs, CPU threads: {torch.get_num_threads()}")
    rng = np.random.default_rng(0)
    for width in (20, 80):
        M, U0, V0 = problem(width, RUNS, rng)
        mask = masks.Bernoulli(width, 1 / 1.5)
        generator = torch.Generator().manual_seed(0)
        started = time.perf_counter()
        linear.algorithm1(M, U0, V0, mask, 0.005, steps, generator, checkpoints=[0, steps],
                          progress=False)
        batched = per_step(time.perf_counter() - started, steps)
        loop_steps = max(steps // 10, 20)
        started = time.perf_counter()
        for n in range(RUNS):
            linear.algorithm1(M, U0[n:n + 1], V0[n:n + 1], mask, 0.005, loop_steps, generator,
                              checkpoints=[0, loop_steps], progress=False)
        torch_loop = per_step(time.perf_counter() - started, loop_steps)
        started = time.perf_counter()
        numpy_loop(M, U0, V0, mask.retain, 0.005, loop_steps, rng)
        numpy_time = per_step(time.perf_counter() - started, loop_steps)
        print(f"   r = {width:2d}: batched {batched:7.0f} µs/step | per-run torch loop {torch_loop:7.0f} µs/step "
              f"(×{torch_loop / batched:.1f}) | per-run numpy loop {numpy_time:7.0f} µs/step (×{numpy_time / batched:.1f})")


def figure3(steps: int) -> None:
    device = default_device()
    print(f"2. Figure 3 at full scale on {device}: six configurations, {RUNS} runs, {steps:,} steps each,\n"
          "   one batch per configuration against the three rates of a width in one batch (masks.PerRun)")
    rng = np.random.default_rng(1)
    for width in (20, 80):
        M, U0, V0 = problem(width, RUNS, rng)
        rates = [masks.Bernoulli(width, 1 / (1 + lam)) for lam in LAMBDAS]
        schedule = Schedule.inverse_time(0.005, steps / 10, steps)
        started = time.perf_counter()
        for k, mask in enumerate(rates):
            generator = torch.Generator(device=device).manual_seed(k)
            linear.algorithm1(M, U0, V0, mask, schedule, steps, generator, checkpoints=log_checkpoints(steps, 30),
                              metrics=linear.objective_metrics(M, mask), progress=False)
        separate = time.perf_counter() - started
        per_run = masks.PerRun([mask for mask in rates for _ in range(RUNS)])
        started = time.perf_counter()
        linear.algorithm1(M, np.concatenate([U0] * 3), np.concatenate([V0] * 3), per_run, schedule, steps,
                          torch.Generator(device=device).manual_seed(0), checkpoints=log_checkpoints(steps, 30),
                          metrics=linear.objective_metrics(M, per_run), progress=False)
        fused = time.perf_counter() - started
        print(f"   r = {width}: three batches {separate:6.1f} s ({per_step(separate, 3 * steps):5.0f} µs/step) | "
              f"one batch {fused:6.1f} s ({per_step(fused, steps):5.0f} µs/step, ×{separate / fused:.1f})")


def closed_form_against_lbfgs() -> None:
    print(f"3. Global optimum at {D1}×{D2}, r = 20, λ = 0.5")
    rng = np.random.default_rng(2)
    M, *_ = problem(20, 1, rng)
    started = time.perf_counter()
    best = shrinkage.global_optimum(M, 20, 0.5)
    closed = time.perf_counter() - started
    fun, _ = linear.flat_objective(M, 20, 0.5)
    started = time.perf_counter()
    x = optimize.lbfgs(fun, rng.standard_normal((D1 + D2) * 20) / np.sqrt(D2))
    lbfgs = time.perf_counter() - started
    value, gradient = optimize.value_and_gradient(fun, x)
    print(f"   closed form {closed * 1e3:.1f} ms, f* = {best.value:.12f}")
    print(f"   L-BFGS      {lbfgs * 1e3:.1f} ms (×{lbfgs / closed:.0f}), f = {value:.12f}, "
          f"relative gap {(value - best.value) / best.value:.1e}, ‖∇f‖ = {np.linalg.norm(gradient):.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="steps of the batched engine (loops run a tenth)")
    parser.add_argument("--figure3", action="store_true", help="time the six full-scale Figure 3 configurations")
    parser.add_argument("--figure3-steps", type=int, default=100_000, help="steps of each Figure 3 configuration")
    args = parser.parse_args()
    configure_threads()
    torch.set_default_dtype(torch.float64)
    engine(args.steps)
    if args.figure3:
        figure3(args.figure3_steps)
    closed_form_against_lbfgs()


if __name__ == "__main__":
    main()
