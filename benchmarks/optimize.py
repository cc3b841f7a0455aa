"""Benchmark of the Newton polish and the certificate (`dropnb.optimize`); prints their times.

On the DropBlock objective of the structured chapter's Figure 1 (d₁ × d₂ = 20 × 25, r = 20 at
`book`; 40 × 50, r = 50 at `full`: 900 and 4,500 unknowns), from an L-BFGS end point:

1. the Hessian-free polish (`optimize.newton_polish`: damped Newton steps solved by MINRES on
   Hessian-vector products) against Newton steps with the dense Hessian's pseudo-inverse and against
   scipy's trust-region Newton-CG (`minimize(method="trust-ncg", hessp=...)`, the same
   Hessian-vector products), in time and in the gradient norm reached. The book keeps the polish:
   on this machine it is faster than trust-ncg and ends at a gradient orders of magnitude smaller,
   where trust-ncg stalls at its inner CG tolerance however many iterations it is given;
2. the certificate's Hessian, formed in one batched autograd pass, against one backward pass per
   column (`torch.autograd.functional.hessian` without ``vectorize``; at 900 unknowns only), and
   its eigenvalues.

Usage: python benchmarks/optimize.py
"""

from __future__ import annotations

import time

import numpy as np
import scipy.optimize
import torch

from dropnb import data, linear, masks, optimize
from dropnb.book.config import configure_threads
from dropnb.rounding import UNIT_ROUNDOFF

SIZES = {"book": (20, 25, 20, 4), "full": (40, 50, 50, 5)}  # d₁, d₂, r, block size s


def dense_polish(fun, x, steps=3):
    """Newton steps x ← x − H⁺∇f with the dense Hessian's pseudo-inverse (cutoff √u‖H‖)."""
    _, gradient = optimize.value_and_gradient(fun, x)
    for _ in range(steps):
        step = np.linalg.pinv(optimize.hessian(fun, x), rcond=np.sqrt(UNIT_ROUNDOFF), hermitian=True) @ gradient
        _, new_gradient = optimize.value_and_gradient(fun, x - step)
        if not np.linalg.norm(new_gradient) < np.linalg.norm(gradient):
            break
        x, gradient = x - step, new_gradient
    return x


def trust_ncg(fun, x, steps=3):
    """scipy's trust-region Newton-CG from x, Hessian-vector products by autograd, at most ``steps``
    outer iterations (as many as the polish's Newton steps), gradient tolerance 0."""
    def value_and_gradient(y):
        value, gradient = optimize.value_and_gradient(fun, y)
        return value, gradient

    def hessp(y, v):
        point = torch.tensor(y, dtype=torch.float64, requires_grad=True)
        (gradient,) = torch.autograd.grad(fun(point), point, create_graph=True)
        (hv,) = torch.autograd.grad(gradient, point, grad_outputs=torch.as_tensor(v, dtype=torch.float64))
        return hv.numpy()

    return scipy.optimize.minimize(value_and_gradient, x, jac=True, hessp=hessp, method="trust-ncg",
                                   options={"gtol": 0.0, "maxiter": steps}).x


def timed(call):
    started = time.perf_counter()
    out = call()
    return out, time.perf_counter() - started


def main() -> None:
    configure_threads()
    print(f"CPU threads: {torch.get_num_threads()}")
    rng = np.random.default_rng(0)
    for profile, (d1, d2, r, s) in SIZES.items():
        M = data.matrix_with_spectrum(0.7 ** np.arange(min(r // s, s + 1)), (d1, d2), rng)
        fun, _ = linear.flat_objective(M, r, None, mask=masks.Blocks(r, s, 0.5), S=np.eye(d2))
        x = optimize.lbfgs(fun, 0.3 * rng.standard_normal((d1 + d2) * r), max_iter=3000)
        gradient = lambda y: np.linalg.norm(optimize.value_and_gradient(fun, y)[1])  # noqa: E731
        print(f"{profile}: {x.size:,} unknowns, L-BFGS ends at ‖∇f‖ = {gradient(x):.1e}")
        free, free_time = timed(lambda: optimize.newton_polish(fun, x))
        dense, dense_time = timed(lambda: dense_polish(fun, x))
        trust, trust_time = timed(lambda: trust_ncg(fun, x))
        print(f"   polish: Hessian-free {free_time:6.1f} s to ‖∇f‖ = {gradient(free):.1e} | "
              f"dense pseudo-inverse {dense_time:6.1f} s to {gradient(dense):.1e} (×{dense_time / free_time:.0f}) | "
              f"trust-ncg {trust_time:6.1f} s to {gradient(trust):.1e} (×{trust_time / free_time:.1f})")
        H, batched = timed(lambda: optimize.hessian(fun, free))
        _, eigen = timed(lambda: np.linalg.eigvalsh(H))
        line = f"   certificate: Hessian in one batched pass {batched:5.1f} s, eigenvalues {eigen:5.1f} s"
        if x.size <= 1000:
            point = torch.tensor(free, dtype=torch.float64)
            _, columns = timed(lambda: torch.autograd.functional.hessian(fun, point))
            line += f" | one pass per column {columns:5.1f} s (×{columns / batched:.0f})"
        print(line)


if __name__ == "__main__":
    main()
