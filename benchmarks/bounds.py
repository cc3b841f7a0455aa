"""Benchmark of the bounds chapter's training engine on MovieLens-100K; prints its figures.

The problem is the page `bounds-experiments`'s: the 200 most-rated movies and the 200 users who rated
most of them, the ratings less a user-and-movie bias predictor (ridge 3), minibatch 2000, step 8.

1. Matrix-completion dropout SGD (`dropnb.sensing.completion_sgd`) for R runs (five dropout
   rates × seeds at one width) as one batched tensor program, against a loop that trains the same
   runs one at a time through the same function: seconds per epoch and the speed-up.
2. The seconds of one epoch over the whole training split for the full profile of the page
   (two widths, zero-padded to the largest on a GPU, in blocks of one width on a CPU; five rates
   from the small start and two from the He start, ``--runs`` seeds) on the default device (a GPU
   when present), with the metrics evaluated at the epoch's end.

Usage: python benchmarks/bounds.py [--width 12] [--seeds 5] [--epochs 2] [--runs 50]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from dropnb import datasets, sensing
from dropnb.book.config import configure_threads, default_device

RATES = (0.0, 0.1, 0.2, 0.3, 0.4)
FULL_WIDTHS = (12, 28)  # the page's widths at the source's ratio of parameters to ratings (the source's 30 and 70)
LR = 8.0


def problem():
    """The page's data: rows, cols, residual values (ratings less the bias predictor), training split, shape."""
    ratings = datasets.movielens_100k(verbose=False)
    popular = np.argsort(-np.bincount(ratings.cols, minlength=ratings.n_cols), kind="stable")[:200]
    on_popular = np.isin(ratings.cols, popular)
    active = np.argsort(-np.bincount(ratings.rows[on_popular], minlength=ratings.n_rows), kind="stable")[:200]
    kept = np.isin(ratings.rows, active) & on_popular
    _, rows = np.unique(ratings.rows[kept], return_inverse=True)
    _, cols = np.unique(ratings.cols[kept], return_inverse=True)
    values = ratings.values[kept]
    shape = (int(rows.max()) + 1, int(cols.max()) + 1)
    train = datasets.random_split(len(values), (0.8, 0.1, 0.1), np.random.default_rng(0))[0]
    mean, b, c = sensing.rating_biases(rows[train], cols[train], values[train], shape, 3.0)
    return rows, cols, values - mean - b[rows] - c[cols], train, shape


def starts(runs: int, widths, n_rows: int, n_cols: int, rng):
    largest = max(widths)
    U0, V0 = np.zeros((runs, n_rows, largest)), np.zeros((runs, n_cols, largest))
    for k, w in enumerate(widths):
        U0[k, :, :w] = rng.standard_normal((n_rows, w)) * np.sqrt(2 / w)
        V0[k, :, :w] = rng.standard_normal((n_cols, w)) * np.sqrt(2 / w)
    return U0, V0


def batched_against_loop(width: int, seeds: int, epochs: int) -> None:
    rows, cols, values, train, (n_rows, n_cols) = problem()
    runs = len(RATES) * seeds
    retain = np.repeat([1 - p for p in RATES], seeds)
    U0, V0 = starts(runs, [width] * runs, n_rows, n_cols, np.random.default_rng(1))
    args = (rows[train], cols[train], values[train])
    generator = torch.Generator().manual_seed(0)
    sensing.completion_sgd(*args, U0[:1], V0[:1], 1.0, width, LR, 1, 2000, generator, progress=False)  # warm-up
    started = time.perf_counter()
    sensing.completion_sgd(*args, U0, V0, retain, width, LR, epochs, 2000, generator, progress=False)
    batched = (time.perf_counter() - started) / epochs
    started = time.perf_counter()
    for k in range(runs):
        sensing.completion_sgd(*args, U0[k:k + 1], V0[k:k + 1], retain[k], width, LR, epochs, 2000, generator,
                               progress=False)
    loop = (time.perf_counter() - started) / epochs
    print(f"1. ML-100K (dense corner), {len(train):,} training ratings, width {width}, {runs} runs, CPU threads "
          f"{torch.get_num_threads()}: batched {batched:.2f} s/epoch | per-run loop {loop:.2f} s/epoch "
          f"(speed-up ×{loop / batched:.1f})")


def full_epoch(seeds: int) -> None:
    rows, cols, values, train, (n_rows, n_cols) = problem()
    device = default_device()
    grid = [(w, p) for w in FULL_WIDTHS for p in RATES for _ in range(seeds)]  # the small start: every rate
    grid += [(w, p) for w in FULL_WIDTHS for p in (RATES[0], RATES[-1]) for _ in range(seeds)]  # the He start
    retain = np.array([1 - p for _, p in grid])
    widths = [w for w, _ in grid]
    U0, V0 = starts(len(grid), widths, n_rows, n_cols, np.random.default_rng(2))
    sets = {"train": (rows[train], cols[train], values[train])}
    generator = torch.Generator(device=device).manual_seed(0)
    started = time.perf_counter()
    sensing.completion_sgd(rows[train], cols[train], values[train], U0, V0, retain, widths, LR, 1, 2000, generator,
                           metrics=sensing.completion_metrics(sets, retain, objective="train"), progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(f"2. one epoch of the full profile on {device} ({len(grid)} runs, widths {FULL_WIDTHS}, "
          f"metrics included): {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=50, help="seeds of the full profile's epoch (part 2)")
    parser.add_argument("--skip-full", action="store_true", help="skip part 2")
    args = parser.parse_args()
    configure_threads()
    batched_against_loop(args.width, args.seeds, args.epochs)
    if not args.skip_full:
        full_epoch(args.runs)
