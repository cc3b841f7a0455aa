"""Numerical minimization as an independent witness of a closed form, with a stated error bound.

An objective is a torch function of one flat float64 vector; gradients and Hessians come from
autograd (exact up to roundoff). :func:`minimize` runs L-BFGS (scipy) from a starting point and
then a few Newton steps with the Hessian's pseudo-inverse (each kept only if it lowers the
gradient norm), which converge quadratically also
when the minima form a manifold (the Hessian is singular along it). :class:`Certificate` turns
the final gradient norm g and the curvature μ across the manifold into bounds:

    distance to the set of minima ≲ δ = g/μ,   f − f_min ≲ g²/(2μ),

first-order estimates that hold near a minimum whose Hessian is positive off its null space.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.optimize import minimize as scipy_minimize

from .rounding import UNIT_ROUNDOFF

Objective = Callable[[torch.Tensor], torch.Tensor]


def value_and_gradient(fun: Objective, x: np.ndarray) -> tuple[float, np.ndarray]:
    """f(x) and ∇f(x) by autograd, in float64."""
    point = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    value = fun(point)
    (gradient,) = torch.autograd.grad(value, point)
    return float(value.detach()), gradient.numpy()


def hessian(fun: Objective, x: np.ndarray) -> np.ndarray:
    """∇²f(x) by autograd, symmetrized."""
    H = torch.autograd.functional.hessian(fun, torch.tensor(x, dtype=torch.float64)).numpy()
    return (H + H.T) / 2


def curve_second_derivative(fun: Objective, curve: Callable[[torch.Tensor], torch.Tensor], t: float = 0.0) -> float:
    """g''(t) for g(t) = f(x(t)), by autograd (exact up to roundoff): the curvature of ``fun`` along
    the twice differentiable curve ``curve``, which maps a scalar tensor t to a flat vector x(t)."""
    if not np.isfinite(t):
        raise ValueError(f"t must be finite, got {t!r}")
    s = torch.tensor(float(t), dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(fun(curve(s)), s, create_graph=True)
    (second,) = torch.autograd.grad(first, s)
    return float(second)


@dataclass(frozen=True)
class Certificate:
    """Where a minimization ended: ``x``, ``value``, ``gradient_norm`` g, ``curvature`` μ (the
    smallest Hessian eigenvalue above the null-space cutoff √u‖H‖), the number ``null`` of
    eigenvalues below the cutoff in absolute value, and ``lowest``, the smallest eigenvalue."""

    x: np.ndarray
    value: float
    gradient_norm: float
    curvature: float
    null: int
    lowest: float

    @property
    def distance(self) -> float:
        """δ = g/μ, the first-order distance to the nearest minimum (∞ without positive curvature)."""
        return self.gradient_norm / self.curvature if self.curvature > 0 else float("inf")

    @property
    def value_gap(self) -> float:
        """g²/(2μ), the first-order bound on f − f_min (∞ without positive curvature)."""
        return self.gradient_norm**2 / (2 * self.curvature) if self.curvature > 0 else float("inf")


def certify(fun: Objective, x: np.ndarray) -> Certificate:
    """Gradient norm and Hessian spectrum of ``fun`` at ``x``."""
    value, gradient = value_and_gradient(fun, x)
    eigenvalues = np.linalg.eigvalsh(hessian(fun, x))
    cutoff = np.sqrt(UNIT_ROUNDOFF) * np.abs(eigenvalues).max()
    above = eigenvalues[eigenvalues > cutoff]
    return Certificate(x=np.array(x), value=value, gradient_norm=float(np.linalg.norm(gradient)),
                       curvature=float(above.min()) if above.size else 0.0,
                       null=int(np.sum(np.abs(eigenvalues) <= cutoff)), lowest=float(eigenvalues.min()))


def lbfgs(fun: Objective, x0: np.ndarray, gtol: float = 1e-10, max_iter: int = 20_000) -> np.ndarray:
    """The end point of L-BFGS (scipy) from ``x0``, run until ‖∇f‖∞ ≤ ``gtol`` or ``max_iter`` iterations."""
    x0 = np.asarray(x0, dtype=np.float64).ravel()
    if not np.all(np.isfinite(x0)):
        raise ValueError("x0 must be finite")
    if not (np.isfinite(gtol) and gtol > 0):
        raise ValueError(f"gtol must be a positive number, got {gtol!r}")
    result = scipy_minimize(lambda x: value_and_gradient(fun, x), x0, jac=True, method="L-BFGS-B",
                            options=dict(gtol=gtol, ftol=0.0, maxiter=max_iter, maxfun=2 * max_iter, maxcor=30))
    return result.x


def newton_polish(fun: Objective, x: np.ndarray, steps: int = 3) -> np.ndarray:
    """Up to ``steps`` Newton steps x ← x − H⁺∇f (pseudo-inverse with cutoff √u‖H‖), each kept
    only if it lowers ‖∇f‖."""
    x = np.asarray(x, dtype=np.float64)
    _, gradient = value_and_gradient(fun, x)
    for _ in range(steps):
        step = np.linalg.pinv(hessian(fun, x), rcond=np.sqrt(UNIT_ROUNDOFF), hermitian=True) @ gradient
        _, new_gradient = value_and_gradient(fun, x - step)
        if not np.linalg.norm(new_gradient) < np.linalg.norm(gradient):
            break
        x, gradient = x - step, new_gradient
    return x


def minimize(fun: Objective, x0: np.ndarray, gtol: float = 1e-10, max_iter: int = 20_000,
             newton_steps: int = 3) -> Certificate:
    """:func:`lbfgs`, then :func:`newton_polish`, then :func:`certify` at the end point."""
    return certify(fun, newton_polish(fun, lbfgs(fun, x0, gtol, max_iter), newton_steps))
