"""Benchmark of the image attacks (`dropnb.adversarial.classifier_attack`); prints attack steps per second.

Attack steps per second (one step is one gradient step on one point of one run) of the batched
attack, R two-layer networks as one tensor program, against a loop that attacks with the same R
networks one at a time through the same function; MNIST-sized inputs (d = 784, m = 100, one
output), random pixels; on the default device (a GPU when present).

Usage: python benchmarks/adversarial.py [--runs 10] [--points 256] [--steps 20]
"""

from __future__ import annotations

import argparse
import time

import torch

from dropnb import adversarial
from dropnb.config import configure_threads, default_device

DIM, WIDTH = 784, 100


def attack(params: dict, x: torch.Tensor, y: torch.Tensor, steps: int, rule: str) -> float:
    """Seconds of one ``steps``-step attack of every point of x for the networks ``params``."""
    start = time.perf_counter()
    adversarial.classifier_attack(params, x, y, 0.01, 0.1, 0.01, steps, "reflected", rule, "linf")
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--points", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    threads = configure_threads()
    device = default_device()
    generator = torch.Generator(device).manual_seed(0)
    params = adversarial.mlp_init(args.runs, DIM, WIDTH, 1, generator)
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


if __name__ == "__main__":
    main()
