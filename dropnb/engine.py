"""The training engine: one descent loop for the whole book, batched over runs, on any device.

A run advances a *state*, named arrays with a leading run dimension R (torch tensors, on the CPU
or a GPU, or numpy arrays), by a *step* for t = 0, …, T − 1 under a step-size :class:`Schedule`.
The engine stops a run whose state is no longer finite, and at checkpoint steps evaluates *metrics* (functions of
the state returning arrays with a leading run dimension) and, if asked, keeps a copy of the state.
A step may report its loss per run and may end the run early. Everything it returns is a numpy
float64 array, in one result type, :class:`Run`.

* :func:`descend` is the loop itself, for steps written by hand (closed-form gradients, numpy
  references, runs that freeze once converged).
* :func:`train` builds the step from a model: parameters, a loss per run and a data source, with
  gradient descent (W ← W − ηₜ∇W) or Adam from autograd, and an optional projection after each
  update (for example onto a max-norm ball). Runs are independent, so the gradient of the summed
  loss is every run's own gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import torch
from tqdm import tqdm  # the text bar: tqdm.auto warns in a kernel without ipywidgets

from .checks import error, flag, function, instance, integer, matrix, positive, tensor, text

State = dict[str, Any]
Metrics = Callable[[State], Mapping[str, Any]]
Step = Callable[[int, float], Any]


@dataclass(frozen=True)
class Schedule:
    """Step sizes ηₜ > 0 for t = 0, …, ``steps`` − 1, given by ``rate``: t ↦ ηₜ.

    Build one with :meth:`constant` (ηₜ = η), :meth:`stages` (η₁ for n₁ steps, then η₂ for n₂
    steps, …), :meth:`inverse_time` (ηₜ = η₀/(1 + t/s)) or :meth:`of`, which accepts any of these
    forms.
    """

    steps: int
    rate: Callable[[int], float]

    def __post_init__(self):
        object.__setattr__(self, "steps", integer(self.steps, "steps"))
        if not callable(self.rate):
            raise ValueError(f"rate must be a function t ↦ ηₜ, got {self.rate!r}")

    def __call__(self, t: int) -> float:
        return self.rate(t)

    @classmethod
    def constant(cls, eta: float, steps: int, name: str = "eta") -> "Schedule":
        """ηₜ = η for ``steps`` steps."""
        eta = positive(eta, name)
        return cls(steps, lambda t: eta)

    @classmethod
    def stages(cls, pairs, name: str = "schedule") -> "Schedule":
        """η₁ for n₁ steps, then η₂ for n₂ steps, …, from the pairs (ηᵢ, nᵢ)."""
        try:
            pairs = [(eta, n) for eta, n in pairs]
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a sequence of (step size, number of steps) pairs, got {pairs!r}") from None
        if not pairs:
            raise ValueError(f"{name} must not be empty")
        etas = [positive(eta, f"{name} step size") for eta, _ in pairs]
        ends = np.cumsum([integer(n, f"{name} step count") for _, n in pairs])
        return cls(int(ends[-1]), lambda t: etas[int(np.searchsorted(ends, t, side="right"))])

    @classmethod
    def inverse_time(cls, initial: float, scale: float, steps: int) -> "Schedule":
        """ηₜ = η₀/(1 + t/s), η₀ = ``initial``, s = ``scale``."""
        initial, scale = positive(initial, "initial"), positive(scale, "scale")
        return cls(steps, lambda t: initial / (1 + t / scale))

    @classmethod
    def of(cls, lr, steps: int | None = None, name: str = "lr") -> "Schedule":
        """A schedule from ``lr`` (named ``name`` in errors): a Schedule, a number or a function
        t ↦ ηₜ (both need ``steps``), or a sequence of (η, n) stages."""
        if isinstance(lr, Schedule):
            if steps is not None and steps != lr.steps:
                raise ValueError(f"steps must equal the schedule's {lr.steps} steps, got {steps!r}")
            return lr
        if steps is None and not callable(lr) and np.ndim(lr) != 0:
            return cls.stages(lr, name)
        if steps is None:
            raise ValueError(f"steps is required with {name} a number or a function t ↦ ηₜ")
        if not callable(lr):
            return cls.constant(lr, steps, name)
        schedule = cls(steps, lr)
        positive(lr(0), f"{name}(0)")
        return schedule


@dataclass
class Run:
    """What a run records, as numpy float64 arrays.

    ``steps`` (C,): the checkpoints reached; ``metrics[name]`` (C, R, …): each metric there;
    ``kept[name]`` (C, R, …): the state there, when kept (else empty); ``final[name]``: the state
    after the last step; ``losses`` (R, T): the loss of each run at each step before its update,
    when the step reports one (else None); ``taken``: the number of steps taken (fewer than the
    schedule's when the run ended early); ``outcome[name]``: per-run results the caller adds at
    the end (for example steps to convergence).
    """

    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    kept: dict[str, np.ndarray]
    final: dict[str, np.ndarray]
    losses: np.ndarray | None
    taken: int
    outcome: dict[str, np.ndarray] = field(default_factory=dict)

    def select(self, runs) -> "Run":
        """The record of some of the runs (an index, a slice or a list of run numbers), as a Run."""
        if not isinstance(runs, (int, np.integer, slice, list, range, np.ndarray)) or isinstance(runs, bool):
            raise error("runs", "a run number, a slice or a list of run numbers", runs)
        pick = [runs] if isinstance(runs, (int, np.integer)) else runs
        return Run(steps=self.steps, metrics={k: v[:, pick] for k, v in self.metrics.items()},
                   kept={k: v[:, pick] for k, v in self.kept.items()}, final={k: v[pick] for k, v in self.final.items()},
                   losses=None if self.losses is None else self.losses[pick], taken=self.taken,
                   outcome={k: v[pick] for k, v in self.outcome.items()})


def log_checkpoints(steps: int, count: int) -> np.ndarray:
    """About ``count`` distinct integers from 0 to ``steps``, log-spaced (0 and ``steps`` included)."""
    steps, count = integer(steps, "steps"), integer(count, "count", minimum=2)
    return np.unique(np.concatenate([[0], np.geomspace(1, steps, count - 1).round().astype(int)]))


def check_checkpoints(checkpoints, steps: int) -> np.ndarray:
    """The sorted distinct checkpoint steps in [0, steps]; about 40 log-spaced ones if None."""
    if checkpoints is None:
        return log_checkpoints(steps, 40)
    steps, requested = integer(steps, "steps", minimum=0), checkpoints
    checkpoints = matrix(checkpoints, "checkpoints", ndim=1)
    if not np.all(checkpoints == np.round(checkpoints)):
        raise error("checkpoints", "a set of whole step numbers", requested)
    checkpoints = np.unique(checkpoints.astype(int))
    if checkpoints.size == 0 or checkpoints.min() < 0 or checkpoints.max() > steps:
        raise ValueError(f"checkpoints must be a non-empty set of steps in [0, {steps}], got {checkpoints!r}")
    return checkpoints


def to_numpy(a) -> np.ndarray:
    """A real tensor or array as a numpy float64 array (a copy), of any shape; NaN and ±∞ are kept
    (a diverged metric is recorded as it is) and booleans read 0 and 1; complex numbers, strings
    and objects are refused (a complex value would lose its imaginary part)."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    if isinstance(a, (str, bytes)) or np.asarray(a).dtype.kind not in "biuf":
        raise error("a", "a real array or tensor", a)
    return np.array(a, dtype=np.float64)


# Steps between two checks that the state is finite, besides the checkpoints and the end: a
# diverging run stops within this many steps, at one read of the device per check.
FINITE_EVERY = 100


def check_finite(state: Mapping[str, Any], step: int, description: str) -> None:
    """Raise FloatingPointError naming the quantity, the run (its leading index) and the step
    when an array of ``state`` holds a NaN or an infinity; nothing non-finite is returned."""
    state = instance(state, "state", dict, "a dict of names to arrays")
    step, description = integer(step, "step", minimum=0), text(description, "description")
    for name, a in state.items():
        bad = ~torch.isfinite(a) if isinstance(a, torch.Tensor) else ~np.isfinite(np.asarray(a))
        if bool(bad.any()):
            first = tuple(int(i) for i in (bad.nonzero()[0] if isinstance(bad, torch.Tensor) else np.argwhere(bad)[0]))
            where = f" (first in run {first[0]}, entry {first})" if first else ""
            raise FloatingPointError(f"{description} diverged before step {step}: {name} is not finite{where}; "
                                     "lower the step size")


def descend(state: State, step: Step, schedule: Schedule, *, checkpoints=None, metrics: Metrics | None = None,
            keep: bool = False, progress: bool = True, description: str = "descent") -> Run:
    """Call ``step(t, ηₜ)`` for t = 0, …, T − 1 (T = ``schedule.steps``); the step updates ``state``
    in place and returns None, its loss per run (R,), or True to end the run after step t − 1.

    At every checkpoint t (about 40 log-spaced ones if None) ``metrics(state)`` is recorded and, if
    ``keep``, the state. The state must stay finite: it is checked at the checkpoints, every
    :data:`FINITE_EVERY` steps and at the end (FloatingPointError naming the quantity, run and step).
    """
    step = function(step, "step")
    schedule = instance(schedule, "schedule", Schedule, "a Schedule")
    flag(keep, "keep")
    flag(progress, "progress")
    checkpoints = check_checkpoints(checkpoints, schedule.steps)
    wanted = set(checkpoints.tolist())
    reached, recorded, kept, losses = [], {}, {name: [] for name in state}, []
    t = 0
    for t in tqdm(range(schedule.steps + 1), disable=not progress, desc=description, mininterval=1.0):
        if t in wanted or t % FINITE_EVERY == 0:
            check_finite(state, t, description)
        if t in wanted:
            reached.append(t)
            if keep:
                for name, a in state.items():
                    kept[name].append(to_numpy(a))
            with torch.no_grad():
                for name, value in (metrics(state) if metrics else {}).items():
                    recorded.setdefault(name, []).append(to_numpy(value))
        if t == schedule.steps:
            break
        loss = step(t, schedule(t))
        if loss is True:
            break
        if loss is not None:
            losses.append(loss)
    check_finite(state, t, description)
    return Run(steps=np.array(reached, dtype=int), metrics={name: np.stack(v) for name, v in recorded.items()},
               kept={name: np.stack(v) for name, v in kept.items() if v},
               final={name: to_numpy(a) for name, a in state.items()},
               losses=_stack_losses(losses), taken=t)


def _stack_losses(losses: list) -> np.ndarray | None:
    """The per-step losses as one (R, T) array (one transfer from the device for tensors)."""
    if not losses:
        return None
    if isinstance(losses[0], torch.Tensor):
        return to_numpy(torch.stack(losses, dim=-1))
    return np.stack(losses, axis=-1).astype(np.float64)


def train(parameters: Mapping[str, torch.Tensor], loss: Callable[[State, Any], torch.Tensor], schedule: Schedule, *,
          data: Callable[[int], Any] | None = None, optimizer: str = "sgd", project: Callable[[State], None] | None = None,
          checkpoints=None, metrics: Metrics | None = None, keep: bool = False, progress: bool = True,
          description: str = "training") -> Run:
    """Minimize ``loss(parameters, batch)``, a tensor (R,) of one loss per run, from copies of the
    ``parameters`` (tensors with a leading run dimension, on their device).

    Each step draws ``batch = data(t)`` (None without a data source: full batch), differentiates the
    summed loss and updates with ``optimizer``: ``"sgd"``, W ← W − ηₜ∇W, or ``"adam"`` (torch's
    Adam with learning rate ηₜ); then ``project(parameters)``, if given, acts in place without
    gradients. The loss must stay finite (FloatingPointError, raised at the next checkpoint). Returns
    :func:`descend`'s Run, with ``losses`` the loss at every step before its update.
    """
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    loss, schedule = function(loss, "loss"), instance(schedule, "schedule", Schedule, "a Schedule")
    if not isinstance(parameters, Mapping) or not parameters:
        raise ValueError(f"parameters must be a non-empty mapping of names to tensors, got {parameters!r:.80}")
    parameters = {name: tensor(p, f"parameters[{name!r}]", ndim=0, batched=True) for name, p in parameters.items()}
    if data is not None:
        function(data, "data")
    if project is not None:
        function(project, "project")
    state = {name: p.detach().clone().requires_grad_(True) for name, p in parameters.items()}
    weights = list(state.values())
    adam = torch.optim.Adam(weights, lr=schedule(0)) if optimizer == "adam" else None
    # Whether every loss so far was finite, kept on the device and read only before a checkpoint and at the
    # end: reading it every step would make the host wait for the device at every step.
    finite = torch.ones((), dtype=torch.bool, device=weights[0].device)
    due = set(check_checkpoints(checkpoints, schedule.steps).tolist()) | {schedule.steps}

    def step(t: int, eta: float) -> torch.Tensor:
        value = loss(state, None if data is None else data(t))
        finite.logical_and_(torch.isfinite(value.detach()).all())
        if adam is None:
            gradients = torch.autograd.grad(value.sum(), weights)
            with torch.no_grad():
                for W, G in zip(weights, gradients):
                    W.sub_(eta * G)
        else:
            adam.param_groups[0]["lr"] = eta
            adam.zero_grad()
            value.sum().backward()
            adam.step()
        if project is not None:
            with torch.no_grad():
                project(state)
        if t + 1 in due and not bool(finite):
            raise FloatingPointError(f"{description} diverged before step {t + 1}: a loss was not finite; "
                                     "lower the step size")
        return value.detach()

    return descend(state, step, schedule, checkpoints=checkpoints, metrics=metrics, keep=keep, progress=progress,
                   description=description)
