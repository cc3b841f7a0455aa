"""Benchmarks of `dropnb.classifiers` and `dropnb.adversarial`: the image attacks, and the grid search of Figure 6-2.

Attack steps per second (one step is one gradient step on one point of one run) of the batched
attack (`classifier_attack`), R two-layer networks as one tensor program, against a loop that
attacks with the same R networks one at a time through the same function; MNIST-sized inputs
(d = 784, m = 100, one output), random pixels; on the default device (a GPU when present).

The grid search (`grid_readings`, branch and bound over cubes of the grid) at the source's 800
points per axis, against scoring every point: the time of one slice of 800² points, times 800.

Usage: python benchmarks/adversarial.py [--runs 10] [--points 256] [--steps 20] [--grid 800]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from dropnb import adversarial, classifiers
from dropnb.book.config import configure_threads, default_device

DIM, WIDTH = 784, 100


def attack(params: dict, x: torch.Tensor, y: torch.Tensor, steps: int, rule: str) -> float:
    """Seconds of one ``steps``-step attack of every point of x for the networks ``params``."""
    start = time.perf_counter()
    classifiers.classifier_attack(params, x, y, 0.01, 0.1, 0.01, steps, "reflected", rule, "linf")
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def grid(points: int) -> None:
    """Seconds of the exact top 1,000 of every reading on the source's grid, against a full scan's estimate."""
    x = np.array([3.0, 2.0, 1.0])
    start = time.perf_counter()
    adversarial.grid_readings(x, 0, 0.7078, 0.51, points, top=1000)
    searched = time.perf_counter() - start
    values = np.linspace(-0.51, 0.51, points)
    D2, D3 = (v.ravel() for v in np.meshgrid(values, values, indexing="ij"))
    start = time.perf_counter()
    Z = np.stack([x[0] + 0 * D2, x[1] + D2, x[2] + D3], 1)  # one slice δ₁ = 0, every reading scored
    adversarial._reading_scores(Z, x, 0)
    scan = (time.perf_counter() - start) * points
    print(f"grid {points}³: branch and bound {searched:.2f} s, scoring every point about {scan:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--points", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--grid", type=int, default=800, help="points per axis of the grid search (0: skip)")
    args = parser.parse_args()
    threads = configure_threads()
    device = default_device()
    generator = torch.Generator(device).manual_seed(0)
    params = classifiers.mlp_init(args.runs, DIM, WIDTH, 1, generator)
    dtype = params["W1"].dtype
    x = torch.rand((args.runs, args.points, DIM), generator=generator, device=device, dtype=dtype)
    y = torch.where(torch.rand((args.runs, args.points), generator=generator, device=device) < 0.5, -1.0, 1.0)
    print(f"device {device}, {threads} thread(s), {args.runs} runs, {args.points} points, {args.steps} steps, "
          f"d = {DIM}, m = {WIDTH}")
    print(f"{'rule':>6} {'batched (steps/s)':>18} {'loop (steps/s)':>15} {'speed-up':>9}")
    for rule in ("sign", "raw"):
        batched = attack(params, x, y, args.steps, rule)
        looped = sum(attack({k: v[r:r + 1] for k, v in params.items()}, x[r:r + 1], y[r:r + 1], args.steps, rule)
                     for r in range(args.runs))
        total = args.runs * args.points * args.steps
        print(f"{rule:>6} {total / batched:>18,.0f} {total / looped:>15,.0f} {looped / batched:>9.1f}")
    if args.grid:
        grid(args.grid)


if __name__ == "__main__":
    main()
