"""Benchmark of the bounds chapter's training engine on MovieLens-100K; prints its figures.

1. Matrix-completion dropout SGD (`dropnb.training.completion_sgd`) for R runs (five dropout
   rates × seeds at one width) as one batched tensor program, against a loop that trains the same
   runs one at a time through the same function: seconds per epoch and the speed-up.
2. The seconds of one epoch over the whole training split for the full profile of the page
   `bounds-experiments` (five widths, zero-padded to the largest on a GPU, in blocks of one width on
   a CPU; five rates, ``--runs`` seeds) on the default device (a GPU when present), with the metrics
   evaluated at the epoch's end.

Usage: python benchmarks/bounds.py [--width 19] [--seeds 5] [--epochs 2] [--runs 50]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from dropnb import datasets, training
from dropnb.config import configure_threads, default_device

RATES = (0.0, 0.1, 0.2, 0.3, 0.4)
FULL_WIDTHS = (8, 19, 30, 41, 52)  # the page's widths at the source's ratio of parameters to ratings


def problem():
    ratings = datasets.movielens_100k(verbose=False)
    train = datasets.random_split(len(ratings.values), (0.8, 0.1, 0.1), np.random.default_rng(0))[0]
    values = ratings.values - ratings.values[train].mean()
    return ratings, train, values


def starts(runs: int, widths, n_rows: int, n_cols: int, rng):
    largest = max(widths)
    U0, V0 = np.zeros((runs, n_rows, largest)), np.zeros((runs, n_cols, largest))
    for k, w in enumerate(widths):
        U0[k, :, :w] = rng.standard_normal((n_rows, w)) * np.sqrt(2 / w)
        V0[k, :, :w] = rng.standard_normal((n_cols, w)) * np.sqrt(2 / w)
    return U0, V0


def batched_against_loop(width: int, seeds: int, epochs: int) -> None:
    ratings, train, values = problem()
    runs = len(RATES) * seeds
    retain = np.repeat([1 - p for p in RATES], seeds)
    U0, V0 = starts(runs, [width] * runs, ratings.n_rows, ratings.n_cols, np.random.default_rng(1))
    args = (ratings.rows[train], ratings.cols[train], values[train])
    generator = torch.Generator().manual_seed(0)
    training.completion_sgd(*args, U0[:1], V0[:1], 1.0, width, 50.0, 1, 2000, generator, progress=False)  # warm-up
    started = time.perf_counter()
    training.completion_sgd(*args, U0, V0, retain, width, 50.0, epochs, 2000, generator, progress=False)
    batched = (time.perf_counter() - started) / epochs
    started = time.perf_counter()
    for k in range(runs):
        training.completion_sgd(*args, U0[k:k + 1], V0[k:k + 1], retain[k], width, 50.0, epochs, 2000, generator,
                                progress=False)
    loop = (time.perf_counter() - started) / epochs
    print(f"1. ML-100K, {len(train):,} training ratings, width {width}, {runs} runs, CPU threads "
          f"{torch.get_num_threads()}: batched {batched:.2f} s/epoch | per-run loop {loop:.2f} s/epoch "
          f"(speed-up ×{loop / batched:.1f})")


def full_epoch(seeds: int) -> None:
    ratings, train, values = problem()
    device = default_device()
    grid = [(w, p) for w in FULL_WIDTHS for p in RATES for _ in range(seeds)]
    retain = np.array([1 - p for _, p in grid])
    widths = [w for w, _ in grid]
    U0, V0 = starts(len(grid), widths, ratings.n_rows, ratings.n_cols, np.random.default_rng(2))
    sets = {"train": (ratings.rows[train], ratings.cols[train], values[train])}
    generator = torch.Generator(device=device).manual_seed(0)
    started = time.perf_counter()
    training.completion_sgd(ratings.rows[train], ratings.cols[train], values[train], U0, V0, retain, widths, 50.0, 1,
                            2000, generator, metrics=training.completion_metrics(sets, retain, objective="train"),
                            progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(f"2. one epoch of the full profile on {device} ({len(grid)} runs, widths {FULL_WIDTHS}, "
          f"metrics included): {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=19)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=50, help="seeds of the full profile's epoch (part 2)")
    parser.add_argument("--skip-full", action="store_true", help="skip part 2")
    args = parser.parse_args()
    configure_threads()
    batched_against_loop(args.width, args.seeds, args.epochs)
    if not args.skip_full:
        full_epoch(args.runs)
