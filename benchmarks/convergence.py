"""Benchmark of Algorithm 4 (`dropnb.relu_lazy.dropout_sgd`); prints its figures.

Samples per second (one sample is one step of one run) of the batched engine, R runs of one width
as one tensor program, against a loop that trains the same R runs one at a time through the same
function, on D-lin (d = 10), for several widths; on the default device (a GPU when present).

Usage: python benchmarks/convergence.py [--runs 24] [--steps 2000] [--widths 256 1024 4096]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from dropnb import relu_lazy
from dropnb.book.config import configure_threads, default_device

DIM, GAP = 10, 0.1


def train(runs: int, width: int, steps: int, device: torch.device, seed: int) -> float:
    """Seconds of ``steps`` steps of Algorithm 4 for ``runs`` runs at once."""
    generator = torch.Generator(device).manual_seed(seed)
    W1 = torch.randn((runs, width, DIM), generator=generator, device=device)
    a = torch.where(torch.rand((runs, width), generator=generator, device=device) < 0.5, -1.0, 1.0)
    sampler = relu_lazy.sphere_margin_sampler(DIM, GAP, runs, generator)
    retain = np.resize([1.0, 0.5, 0.2], runs)
    radius = float(W1.norm(dim=-1).max()) + 30.0
    start = time.perf_counter()
    relu_lazy.dropout_sgd(sampler, W1, a, retain, math.log(2), radius, steps, generator, checkpoints=[0, steps],
                         progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--widths", type=int, nargs="+", default=[256, 1024, 4096])
    args = parser.parse_args()
    threads = configure_threads()
    torch.set_default_dtype(torch.float64)
    device = default_device()
    print(f"device {device}, {threads} thread(s), {args.runs} runs, {args.steps} steps, D-lin d = {DIM}")
    print(f"{'width':>7} {'batched (samples/s)':>20} {'loop (samples/s)':>17} {'speed-up':>9}")
    for width in args.widths:
        batched = train(args.runs, width, args.steps, device, 0)
        looped = sum(train(1, width, args.steps, device, k) for k in range(args.runs))
        total = args.runs * args.steps
        print(f"{width:>7,} {total / batched:>20,.0f} {total / looped:>17,.0f} {looped / batched:>9.1f}")


if __name__ == "__main__":
    main()
