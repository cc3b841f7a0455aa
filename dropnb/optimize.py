"""Numerical minimization as an independent witness of a closed form, with a stated error bound.

An objective is a torch function of one flat float64 vector; gradients and Hessians come from
autograd (exact up to roundoff). :func:`minimize` runs L-BFGS (scipy) from a starting point and
then a few damped Newton steps, each solved by MINRES on Hessian-vector products (no Hessian
matrix is formed) and kept only if it lowers the gradient norm; the damping lets them converge
also when the minima form a manifold (the Hessian is singular along it), each step contracting the
gradient by about μ/m (see :func:`newton_polish`). Only the certificate forms the Hessian, in one
batched autograd pass, for its spectrum. A
:class:`FirstOrderCertificate` turns the final gradient norm g and the curvature m across the
manifold into bounds:

    distance to the set of minima ≲ δ = g/m,   f − f_min ≲ g²/(2m),

first-order estimates that hold near a minimum whose Hessian is positive off its null space. At a
point with negative curvature (an eigenvalue below −√u‖H‖: a saddle or a maximum) they do not
hold, and asking the certificate for them raises :class:`NotAMinimum`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.optimize import minimize as scipy_minimize
from scipy.sparse.linalg import LinearOperator, minres

from . import checks
from .rounding import UNIT_ROUNDOFF

Objective = Callable[[torch.Tensor], torch.Tensor]
MINRES_RTOL = 1e-10  # relative residual of the damped Newton systems (far below the damping's effect)


def _check(fun, x, name: str = "x") -> np.ndarray:
    checks.function(fun, "fun")
    return checks.vector(x, name)


def value_and_gradient(fun: Objective, x: np.ndarray) -> tuple[float, np.ndarray]:
    """f(x) and ∇f(x) by autograd, in float64, at a finite vector x."""
    return _value_and_gradient(fun, _check(fun, x))


def _value_and_gradient(fun, x):
    point = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    value = fun(point)
    (gradient,) = torch.autograd.grad(value, point)
    return float(value.detach()), gradient.numpy()


def hessian(fun: Objective, x: np.ndarray) -> np.ndarray:
    """∇²f(x) by autograd, symmetrized, at a finite vector x."""
    return _hessian(fun, _check(fun, x))


def _hessian(fun, x):
    # vectorize: one batched backward pass over all n basis directions instead of n passes
    H = torch.autograd.functional.hessian(fun, torch.tensor(x, dtype=torch.float64), vectorize=True).numpy()
    return (H + H.T) / 2


def curve_second_derivative(fun: Objective, curve: Callable[[torch.Tensor], torch.Tensor], t: float = 0.0) -> float:
    """g''(t) for g(t) = f(x(t)), by autograd (exact up to roundoff): the curvature of ``fun`` along
    the twice differentiable curve ``curve``, which maps a scalar tensor t to a flat vector x(t)."""
    t = checks.number(t, "t")
    checks.function(fun, "fun")
    checks.function(curve, "curve")
    s = torch.tensor(float(t), dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(fun(curve(s)), s, create_graph=True)
    (second,) = torch.autograd.grad(first, s)
    return float(second)


class NotAMinimum(ValueError):
    """A first-order bound was asked of a point whose Hessian has negative curvature."""


@dataclass(frozen=True)
class FirstOrderCertificate:
    """Where a minimization ended: ``x``, ``value``, ``gradient_norm`` g, the Hessian's ``cutoff``
    √u‖H‖ (eigenvalues within it of zero count as zero), ``curvature`` m (the smallest eigenvalue
    above the cutoff), the numbers ``null`` and ``negative`` of eigenvalues within the cutoff and
    below −cutoff, and ``lowest``, the smallest eigenvalue."""

    x: np.ndarray
    value: float
    gradient_norm: float
    cutoff: float
    curvature: float
    null: int
    negative: int
    lowest: float

    @property
    def is_minimum(self) -> bool:
        """No negative curvature beyond rounding: the second-order condition of a minimum."""
        return self.negative == 0

    def require_minimum(self) -> "FirstOrderCertificate":
        """The certificate itself; :class:`NotAMinimum` if its Hessian has negative curvature."""
        if not self.is_minimum:
            raise NotAMinimum(f"the point is not a minimum: {self.negative} Hessian eigenvalue(s) below "
                              f"−{self.cutoff:.2e}, the lowest {self.lowest:.3e}; first-order bounds do not apply")
        return self

    @property
    def distance(self) -> float:
        """δ = g/m, the first-order distance to the nearest minimum (∞ without positive curvature);
        :class:`NotAMinimum` at a point with negative curvature."""
        self.require_minimum()
        return self.gradient_norm / self.curvature if self.curvature > 0 else float("inf")

    @property
    def value_gap(self) -> float:
        """g²/(2m), the first-order bound on f − f_min (∞ without positive curvature);
        :class:`NotAMinimum` at a point with negative curvature."""
        self.require_minimum()
        return self.gradient_norm**2 / (2 * self.curvature) if self.curvature > 0 else float("inf")


def certify(fun: Objective, x: np.ndarray) -> FirstOrderCertificate:
    """Gradient norm and Hessian spectrum of ``fun`` at ``x``, with the cutoff √u‖H‖."""
    x = _check(fun, x)
    value, gradient = _value_and_gradient(fun, x)
    eigenvalues = np.linalg.eigvalsh(_hessian(fun, x))
    cutoff = float(np.sqrt(UNIT_ROUNDOFF) * np.abs(eigenvalues).max())
    above = eigenvalues[eigenvalues > cutoff]
    return FirstOrderCertificate(x=np.array(x), value=value, gradient_norm=float(np.linalg.norm(gradient)),
                                 cutoff=cutoff, curvature=float(above.min()) if above.size else 0.0,
                                 null=int(np.sum(np.abs(eigenvalues) <= cutoff)),
                                 negative=int(np.sum(eigenvalues < -cutoff)), lowest=float(eigenvalues.min()))


def lbfgs(fun: Objective, x0: np.ndarray, gtol: float = 1e-10, max_iter: int = 20_000) -> np.ndarray:
    """The end point of L-BFGS (scipy) from ``x0``, run until ‖∇f‖∞ ≤ ``gtol`` or ``max_iter`` iterations."""
    x0 = _check(fun, x0, "x0")
    gtol, max_iter = checks.positive(gtol, "gtol"), checks.integer(max_iter, "max_iter")
    result = scipy_minimize(lambda x: _value_and_gradient(fun, x), x0, jac=True, method="L-BFGS-B",
                            options=dict(gtol=gtol, ftol=0.0, maxiter=max_iter, maxfun=2 * max_iter, maxcor=30))
    return result.x


def bisect(f: Callable[[float], float], low: float, high: float, bracket: float) -> float:
    """The midpoint of [low, high], a bracket of a sign change of f, halved until it is at most ``bracket``
    wide: the root lies within ``bracket``/2 of it (up to the rounding of f near the root). Without a
    sign change it ends at an end point, which a claim on the root then catches (as under a planted bug)."""
    f = checks.function(f, "f")
    low, high, bracket = checks.number(low, "low"), checks.number(high, "high"), checks.positive(bracket, "bracket")
    if not low < high:
        raise ValueError(f"low must be below high, got {low:g} and {high:g}")
    f_low = f(low)
    while high - low > bracket:
        middle = 0.5 * (low + high)
        if (f(middle) > 0) == (f_low > 0):
            low, f_low = middle, f(middle)
        else:
            high = middle
    return 0.5 * (low + high)


def newton_polish(fun: Objective, x: np.ndarray, steps: int = 3) -> np.ndarray:
    """Up to ``steps`` damped Newton steps x ← x − (H + μI)⁻¹∇f, each kept only if it lowers ‖∇f‖.
    Hessian-free: MINRES solves the system with Hessian-vector products by autograd. The damping
    μ = max(‖∇f‖², √u‖H‖) (‖H‖ estimated by power iteration) acts like a pseudo-inverse with cutoff
    √u‖H‖: rounding-level components of ∇f along the null space of H (a manifold of minima) are not
    blown up, while a component along curvature λ ≫ μ is solved to the relative error μ/λ, so the
    steps contract the gradient by about μ/m a step (m the smallest curvature above the cutoff)."""
    x, steps = _check(fun, x), checks.integer(steps, "steps", minimum=0)
    _, gradient = _value_and_gradient(fun, x)
    for _ in range(steps):
        step = _damped_newton_step(fun, x)
        _, new_gradient = _value_and_gradient(fun, x - step)
        if not np.linalg.norm(new_gradient) < np.linalg.norm(gradient):
            break
        x, gradient = x - step, new_gradient
    return x


def _damped_newton_step(fun, x, power_steps: int = 10):
    """(H + μI)⁻¹∇f(x) by MINRES, with Hv = ∇(∇f·v) by autograd on one retained graph."""
    point = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    (gradient,) = torch.autograd.grad(fun(point), point, create_graph=True)

    def product(v):
        direction = torch.as_tensor(np.ravel(v), dtype=torch.float64)
        (hv,) = torch.autograd.grad(gradient, point, grad_outputs=direction, retain_graph=True)
        return hv.numpy()

    g = gradient.detach().numpy()
    v, norm = np.random.default_rng(0).standard_normal(x.size), 0.0
    for _ in range(power_steps):  # ‖H‖ to within a small factor
        v = product(v / np.linalg.norm(v))
        norm = float(np.linalg.norm(v))
        if norm == 0:
            break
    damping = max(float(g @ g), np.sqrt(UNIT_ROUNDOFF) * norm)
    operator = LinearOperator((x.size, x.size), matvec=product, dtype=np.float64)
    step, _ = minres(operator, g, shift=-damping, rtol=MINRES_RTOL, maxiter=x.size)
    return step


def minimize(fun: Objective, x0: np.ndarray, gtol: float = 1e-10, max_iter: int = 20_000,
             newton_steps: int = 3) -> FirstOrderCertificate:
    """:func:`lbfgs`, then :func:`newton_polish`, then :func:`certify` at the end point."""
    x0, newton_steps = _check(fun, x0, "x0"), checks.integer(newton_steps, "newton_steps", minimum=0)
    return certify(fun, newton_polish(fun, lbfgs(fun, x0, gtol, max_iter), newton_steps))
