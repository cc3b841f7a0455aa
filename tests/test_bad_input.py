"""Bad input to every public function of dropnb: a clear ValueError or TypeError naming the argument.

Every public function, class and public method of every dropnb module (found by introspection)
has a valid example call in ``EXAMPLES``; the examples must succeed. Each argument of an example
is then replaced, one at a time, by bad values of its kind (``MUTATIONS``: NaN, ±inf, complex,
string, bool for a count, 0-d, empty and mis-shaped arrays, None for a generator, a negative
size, a probability outside (0, 1]) and the call must raise ValueError or TypeError whose message
names the argument. Where an example has two or more torch tensors, they must also agree
(``mismatched_calls``): one of them cast to float32 while the others are float64, or given one more
run along the batch dimension they share, must be refused naming it, never end in a torch
RuntimeError deep inside. A bad value that the function legitimately accepts is listed in ``ACCEPTED``
with the reason; a listed value that is refused fails the test too, so the list stays true. A new
public function without an example fails :func:`test_every_public_function_has_an_example`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import inspect
import os
import pkgutil
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

import dropnb
import dropnb.book
from dropnb import engine, factorization, features, masks, optimize, relu_decay, relu_polar, stats
from dropnb.book import claims as claims_module
from dropnb.book.layout import GOLDENS
from dropnb import checks, classifiers, relu_lazy

# Modules of the book's machinery (dropnb.book) out of scope: they take paths, HTML and docutils/sphinx
# objects, not numbers, and run outside the chapters. Only a module of dropnb.book may be out of scope:
# every mathematical module is in.
OUT_OF_SCOPE_MODULES = {
    "browser": "drives a headless browser over the built HTML (paths and pages, not numbers)",
    "sphinxext": "sphinx extension hooks, called by sphinx with its own application objects",
    "notebooks": "executes chapters (paths, page names and a CLI)",
    "nbval": "converts pages to notebooks for nbval (page names, paths and a CLI)",
    "planted": "runs planted bugs as forks of chapter runs (page names, code and a CLI)",
    "timing": "rows of page runs (paths, page names, JSON rows and a table for the book build)",
    "gpukit": "the GPU kit's wheels (requirements files, pip and a CLI)",
    "bibliography": "pybtex style plugin, called by sphinxcontrib-bibtex",
}
# Public names that are not entry points for numbers.
OUT_OF_SCOPE = {
    "claims.ClaimFailed": "exception type",
    "optimize.NotAMinimum": "exception type",
    "regression.main": "command-line entry point",
    "claims.Record": "result record (a dataclass the Claims methods fill from validated values)",
    "config.Config": "dataclass of a run's settings, built by dropnb.setup from resolved values",
    "engine.Run": "result record built by engine.descend",
    "deep.DeepOptimum": "result record built by deep.global_optimum",
    "factorization.PolarCertificate": "result record built by factorization.polar_certificate",
    "factorization.Stage": "result record built by factorization.meta_algorithm",
    "factorization.MetaRun": "result record built by factorization.meta_algorithm",
    "features.Digits": "result record built by features.load_digit_subset",
    "relu_decay.FlatPath": "result record built by relu_decay.flat_path",
    "relu_polar.Polar": "result record built by relu_polar.polar",
    "relu_polar.DualityGapCertificate": "result record built by relu_polar.duality_gap_certificate",
    "relu_polar.Reference": "result record built by relu_polar.sector_reference",
    "relu_polar.ConicReference": "result record built by relu_polar.conic_reference",
    "relu_polar.InducedRegularizer": "result record built by relu_polar.induced_regularizer",
    "relu_polar.Escape": "result record built by relu_polar.escape",
    "relu_polar.MetaRun": "result record built by relu_polar.meta_algorithm",
    "relu_polar.Segment": "result record built by relu_polar.non_increasing_path",
    "landscape.CriticalPoint": "result record built by landscape.equalized_critical_points",
    "networks.LinearCriticalPoint": "result record built by networks.shallow_critical_points",
    "optimize.FirstOrderCertificate": "result record built by optimize.certify",
    "shrinkage.Optimum": "result record built by shrinkage.global_optimum",
    "structured.DropBlockBound": "result record built by structured.dropblock_bound",
    "masks.MaskDistribution": "abstract base class (its methods are tested on each distribution)",
    "datasets.DataUnavailable": "exception type",
    "datasets.Ratings": "result record built by datasets.movielens_100k",
    "relu_lazy.CircleMargin": "result record built by relu_lazy.circle_margin",
    "adversarial.Attack": "result record built by adversarial.pgd_attack",
}


def modules() -> dict[str, str]:
    """Every module of dropnb by its short name: the mathematical ones (top level), then those of
    dropnb.book (the book's machinery)."""
    found = {info.name: f"dropnb.{info.name}" for info in pkgutil.iter_modules(dropnb.__path__) if not info.ispkg}
    return found | {info.name: f"dropnb.book.{info.name}" for info in pkgutil.iter_modules(dropnb.book.__path__)}


MODULES = modules()


def public_entries() -> list[str]:
    """Every public function, class and public method (instance or class method) defined in a dropnb
    module in scope, as 'module.name' or 'module.Class.method' (the module's short name)."""
    names = []
    for short, dotted in MODULES.items():
        if short in OUT_OF_SCOPE_MODULES:
            continue
        module = importlib.import_module(dotted)
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(value):
                names.append(f"{short}.{name}")
            elif inspect.isclass(value):
                names.append(f"{short}.{name}")
                for attribute, member in vars(value).items():
                    function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                    if not attribute.startswith("_") and inspect.isfunction(function):
                        names.append(f"{short}.{name}.{attribute}")
    return names


# --- valid example arguments -------------------------------------------------------------------
class Fresh:
    """An argument built anew for every call (for arguments a call changes or consumes)."""

    def __init__(self, make):
        self.make = make


def rng():
    return Fresh(lambda: np.random.default_rng(0))


def tgen():
    return Fresh(lambda: torch.Generator().manual_seed(0))


M = np.array([[2.0, 0.5, 0.0], [0.3, 1.0, 0.2]])           # d1 × d2 = 2 × 3
U = np.array([[1.0, 0.2], [0.1, 0.8]])                      # d1 × r
V = np.array([[0.5, 0.1], [0.2, 0.6], [0.1, 0.3]])          # d2 × r
S = np.array([[2.0, 0.3, 0.1], [0.3, 1.5, 0.2], [0.1, 0.2, 1.0]])
SYM = np.array([[3.0, 1.0], [1.0, 2.0]])                    # symmetric PSD 2 × 2
X2 = np.array([[1.0, -0.5, 0.3, 0.8], [0.2, 1.0, -0.7, 0.4]])   # n0 = 2 inputs in columns (m = 4)
Y1 = np.array([[1.0, 0.5, -0.2, 0.7]])                      # scalar targets (n2 = 1)
W1 = np.array([[1.0, -0.5, 0.3], [0.2, 0.8, -0.6]])         # n0 × r = 2 × 3
W2 = np.array([[0.7, 0.4, -0.5]])                           # n2 × r = 1 × 3
LAYERS = [np.array([[1.0, 0.5, 0.0], [0.2, 0.3, 1.0]]), np.array([[0.5, 1.0], [1.2, -0.4]]),
          np.array([[1.0, 0.3], [0.1, 0.9]])]               # 3 → 2 → 2 → 2
MOMENTS = (S, np.array([[1.0, 0.2], [0.1, 0.5], [0.3, 0.1]]), SYM)
SPECTRUM = np.array([3.0, 2.0, 0.5])
BERNOULLI = masks.Bernoulli(2, 0.5)
T = torch.tensor
TORCH_M, TORCH_U, TORCH_V, TORCH_S = T(M), T(U), T(V), T(S)
TORCH_LAYERS = [T(W) for W in LAYERS]
RECORD = dict(id="page.claim", chapter="page", page="page", kind="claim", source="Lemma 1", statement="a = b",
              measured=1.0, target=1.0, comparison="close", tolerance=0.1, basis="rounding", passed=True,
              profile="quick", seconds=0.1, device="cpu", printed=None, printed_target=None, seed=0)
RATINGS = (np.array([0, 2, 1]), np.array([1, 0, 1]), np.array([0.5, -1.0, 2.0]))  # rows, cols, values
CIRCLE = (np.array([0.0, 1.0, 2.0, 3.5, 5.0]), np.array([1.0, 1.0, -1.0, -1.0, 1.0]))  # angles, labels
INIT_SHA = __import__("hashlib").sha256((Path(dropnb.__file__)).read_bytes()).hexdigest()
TMP = Path(tempfile.mkdtemp(prefix="dropnb-bad-input-"))  # claims and goldens written by the examples
atexit.register(shutil.rmtree, TMP, True)


def square(x):
    return (x**2).sum()


def schedule(steps=3):
    return engine.Schedule.constant(0.01, steps)


def certificate():
    return optimize.certify(square, np.array([0.0, 0.0]))


def claims():
    return Fresh(lambda: dropnb.Claims("page", "quick", directory=TMP))


def torch_state():
    return Fresh(lambda: dict(w=torch.ones(2, 3)))


EXAMPLES = {
    # checks
    "checks.error": dict(name="x", requirement="finite", value=1.0),
    "checks.integer": dict(value=3, name="n"),
    "checks.distribution": dict(value=[0.25, 0.75], name="p"),
    "checks.number": dict(value=0.5, name="x"),
    "checks.positive": dict(value=0.5, name="x"),
    "checks.nonnegative": dict(value=0.5, name="x"),
    "checks.probability": dict(value=0.5, name="x"),
    "checks.weights": dict(value=np.array([0.5, 1.0]), name="lam", shape=(2,)),
    "checks.per_run": dict(value=np.array([0.5, 1.0]), name="retain", runs=2, check=checks.probability),
    "checks.whole": dict(value=3.0, name="steps"),
    "checks.float_dtype": dict(value=None, device="cpu"),
    "checks.real_array": dict(value=M, name="M"),
    "checks.matrix": dict(value=M, name="M"),
    "checks.vector": dict(value=SPECTRUM, name="s"),
    "checks.tensor": dict(value=TORCH_M, name="M"),
    "checks.tensor_weights": dict(value=0.5, name="lam"),
    "checks.same_batch": dict(tensors=dict(U=TORCH_U, M=TORCH_M)),
    "checks.same_dtype": dict(tensors=dict(U=TORCH_U, M=TORCH_M)),
    "checks.generator": dict(value=rng(), name="rng"),
    "checks.torch_generator": dict(value=tgen(), name="generator"),
    "checks.choice": dict(value="a", name="kind", options=("a", "b")),
    "checks.flag": dict(value=True, name="tied"),
    "checks.text": dict(value="a", name="page"),
    "checks.function": dict(value=square, name="fun"),
    "checks.instance": dict(value=BERNOULLI, name="mask", kind=masks.MaskDistribution, what="a mask"),
    "checks.shape": dict(value=(2, 3), name="shape"),
    "checks.symmetric": dict(value=SYM, name="S"),
    "checks.environment_integer": dict(variable="DROPNB_UNSET_VARIABLE", default=3),
    # claims
    "claims.holds": dict(measured=1.0, target=1.0, comparison="close", tolerance=0.1),
    "claims.Record.line": dict(self=Fresh(lambda: claims_module.Record(**RECORD))),
    "claims.Claims": dict(page="page", profile="quick", device="cpu", directory=TMP, seed=0),
    "claims.Claims.claim": dict(self=claims(), id="page.a", source="Lemma 1", statement="a = b", measured=1.0,
                                target=1.0, tolerance=0.1, basis="rounding"),
    "claims.Claims.erratum": dict(self=claims(), id="page.b", source="Lemma 1", printed="a = 2b", corrected="a = b",
                                  measured=1.0, printed_target=2.0, corrected_target=1.0, tolerance=0.1,
                                  basis="rounding"),
    "claims.Claims.table": dict(self=claims()),
    "claims.Claims.verdicts": dict(self=claims()),
    "claims.verdict_line": dict(record=claims_module.Record(**RECORD)),
    "claims.ClaimView": dict(record=claims_module.Record(**RECORD)),
    "claims.load_records": dict(directory=TMP),
    "claims.totals": dict(records=[RECORD]),
    "claims.summary": dict(records=[RECORD]),
    # config
    "config.resolve_profile": dict(profile="quick"),
    "config.resolve_seed": dict(seed=3, default=0),
    "config.default_device": dict(),
    "config.stream_seed": dict(seed=3, stream="data"),
    "config.Config.pick": dict(self=dropnb.Config("quick", 0), quick=1, book=2, full=3),
    "config.Config.rng": dict(self=dropnb.Config("quick", 0), stream="data"),
    "config.Config.torch_generator": dict(self=dropnb.Config("quick", 0), stream="data"),
    "config.Config.describe": dict(self=dropnb.Config("quick", 0)),
    "config.configure_threads": dict(),
    # data
    "data.isotropic_inputs": dict(kind="gaussian", n=4, d=3, rng=rng()),
    "data.second_moment": dict(factor=V, shift=np.array([1.0, 0.0, 2.0])),
    "data.random_second_moment": dict(d=3, rng=rng()),
    "data.haar_orthogonal": dict(n=3, rng=rng()),
    "data.matrix_with_spectrum": dict(spectrum=np.array([2.0, 1.0]), shape=(2, 3), rng=rng()),
    "data.population_form": dict(X=X2, Y=Y1),
    # deep
    "deep.check_layers": dict(layers=LAYERS, S=S),
    "deep.check_widths": dict(widths=[2, 3]),
    "deep.psd_sqrt": dict(S=S),
    "deep.network_map": dict(layers=LAYERS),
    "deep.envelope_weights": dict(hidden_widths=[2, 2]),
    "deep.effective_rate": dict(hidden_widths=[2, 2], lam=0.5),
    "deep.check_batched_layers": dict(layers=TORCH_LAYERS, S=TORCH_S),
    "deep.batched_sub_regularizers": dict(layers=TORCH_LAYERS, S=TORCH_S),
    "deep.batched_regularizer": dict(layers=TORCH_LAYERS, lam=0.5, S=TORCH_S),
    "deep.batched_objective": dict(M=T(M[:, :3]), layers=TORCH_LAYERS, lam=0.5, S=TORCH_S),
    "deep.sub_regularizers": dict(layers=LAYERS, S=S),
    "deep.moment_regularizer": dict(layers=LAYERS, retain=0.5, S=S),
    "deep.pivot_sub_regularizers": dict(layers=LAYERS, S=S),
    "deep.pivot_regularizer": dict(layers=LAYERS, retain=0.5, S=S),
    "deep.enumerated_regularizer": dict(layers=LAYERS, retain=0.5, S=S),
    "deep.sampled_regularizer": dict(layers=LAYERS, retain=0.5, n=5, rng=rng(), input_factor=S),
    "deep.objective": dict(M=M, layers=LAYERS, retain=0.5, S=S),
    "deep.equalization_gaps": dict(layers=LAYERS, S=S),
    "deep.nuclear_norm": dict(W=M, S=S),
    "deep.rank_one_implementation": dict(u=np.array([1.0, 2.0]), v=np.array([1.0, 0.0, 1.0]), hidden_widths=[2, 3]),
    "deep.balanced_implementation": dict(W=M, hidden_widths=[2, 3]),
    "deep.global_optimum": dict(M=M, hidden_widths=[2, 2], lam=0.5, S=S),
    "deep.flat_objective": dict(M=M, architecture=[3, 2, 2], lam=0.5, S=S),
    # dropconnect
    "dropconnect.regularizer": dict(U=U, V=V, retain=0.5, S=S),
    "dropconnect.printed_regularizer": dict(U=U, V=V, retain=0.5, S=S),
    "dropconnect.objective": dict(M=M, U=U, V=V, retain=0.5, S=S),
    "dropconnect.enumerated_objective": dict(M=M, U=U, V=V, retain=0.5, S=S),
    "dropconnect.sample_masks": dict(shape=4, d2=3, width=2, retain=0.5, rng=rng()),
    "dropconnect.sampled_losses": dict(M=M, U=U, V=V, x=np.ones((4, 3)), Z=np.ones((4, 3, 2)), retain=0.5),
    "dropconnect.monte_carlo_objective": dict(M=M, U=U, V=V, retain=0.5, draw_inputs=lambda n, g: g.standard_normal((n, 3)),
                                              samples=10, rng=rng()),
    "dropconnect.batched_objective": dict(M=TORCH_M, U=TORCH_U, V=TORCH_V, lam=0.5, S=TORCH_S),
    # engine
    "engine.Schedule": dict(steps=3, rate=lambda t: 0.1),
    "engine.Schedule.constant": dict(eta=0.1, steps=3),
    "engine.Schedule.stages": dict(pairs=[(0.1, 2), (0.05, 2)]),
    "engine.Schedule.inverse_time": dict(initial=0.1, scale=10.0, steps=3),
    "engine.Schedule.of": dict(lr=0.1, steps=3),
    "engine.Run.select": dict(self=engine.Run(steps=np.array([0, 2]), metrics=dict(f=np.ones((2, 3))), kept={},
                                               final=dict(U=np.ones((3, 2))), losses=np.ones((3, 2)), taken=2),
                              runs=[0, 2]),
    "engine.log_checkpoints": dict(steps=100, count=5),
    "engine.check_checkpoints": dict(checkpoints=np.array([0, 2, 3]), steps=3),
    "engine.to_numpy": dict(a=TORCH_M),
    "engine.check_finite": dict(state=dict(x=np.ones((2, 3))), step=3, description="descent"),
    "engine.descend": dict(state=torch_state(), step=lambda t, eta: None, schedule=schedule(), progress=False),
    "engine.train": dict(parameters=torch_state(), loss=lambda state, _: (state["w"] ** 2).sum(-1),
                         schedule=schedule(), progress=False),
    # equalizer
    "equalizer.equalizer": dict(U=U, centered=False),
    "equalizer.hadamard": dict(order=4),
    "equalizer.universal_equalizer": dict(U=U),
    "equalizer.importance_scores": dict(U=U, V=V),
    "equalizer.equalized_factors": dict(P=SYM, width=2),
    "equalizer.equalize_network": dict(U=U, V=V),
}
EXAMPLES.update({
    # factorization
    "factorization.singular_value_threshold": dict(Y=M, decay=0.5),
    "factorization.convex_objective": dict(Y=M, Z=M / 2, decay=0.5, kappa=0.1, width=2),
    "factorization.objective": dict(Y=M, U=U, V=V, decay=0.5, kappa=0.1),
    "factorization.gradient": dict(Y=M, U=U, V=V, decay=0.5, kappa=0.1),
    "factorization.flat_objective": dict(Y=M, width=2, decay=0.5, kappa=0.1),
    "factorization.flat_point": dict(U=U, V=V),
    "factorization.balanced_factors": dict(Z=M, width=2),
    "factorization.optimal_factors": dict(Y=M, decay=0.5, width=2),
    "factorization.optimal_value": dict(spectrum=SPECTRUM, decay=0.5, width=2),
    "factorization.squared_nuclear_threshold": dict(spectrum=SPECTRUM, kappa=0.5, width=2),
    "factorization.top_singular_triple": dict(R=M),
    "factorization.PolarCertificate.holds": dict(
        self=Fresh(lambda: factorization.polar_certificate(M, U, V, 0.5)), decay=0.5, relative=1e-6),
    "factorization.polar_certificate": dict(Y=M, U=U, V=V, decay=0.5),
    "factorization.spectral_rounding": dict(Y=M, U=U, V=V),
    "factorization.value_rounding": dict(Y=M, U=U, V=V, decay=0.5, kappa=0.1),
    "factorization.duality_gap": dict(Y=M, U=U, V=V, decay=0.5, kappa=0.1),
    "factorization.append_column": dict(U=U, V=V, u=np.array([1.0, 0.0]), v=np.array([0.0, 1.0, 0.0]), epsilon=0.1),
    "factorization.append_change": dict(sigma=2.0, epsilon=0.1, decay=0.5, kappa=0.1),
    "factorization.split_units": dict(U=U, V=V, copies=2),
    "factorization.expose_null_columns": dict(U=U, V=V),
    "factorization.gradient_descent": dict(Y=M, U0=U, V0=V, decay=0.5, kappa=0.1, step=0.05, tol=1e-3, max_steps=5),
    "factorization.meta_algorithm": dict(Y=M, decay=0.5, U0=U, V0=V, step=0.05, gradient_tol=1e-3,
                                         certificate_tol=1e-2, max_stages=2, max_steps=20),
    # features
    "features.load_digit_subset": dict(n=20, rng=rng()),
    "features.spread_targets": dict(onehot=np.eye(3), first=3.0, ratio=0.6),
    "features.init_weights": dict(sizes=[3, 2], outputs=2, runs=2, rng=rng()),
    "features.features": dict(weights=Fresh(lambda: features.init_weights([3, 2], 2, 2, np.random.default_rng(0))),
                              X=T(V)),
    "features.deterministic_objective": dict(
        weights=Fresh(lambda: features.init_weights([3, 2], 2, 2, np.random.default_rng(0))), X=T(V),
        Y=T(U), cbar=T(np.eye(2) / 2)),
    "features.train": dict(X=V, Y=U, mask=BERNOULLI, hidden=[2], runs=2, lr=0.01, steps=2, rng=rng(),
                           progress=False),
    # relu_capacity
    "relu_capacity.activation_scales": dict(V=V, X=M.T),
    "relu_capacity.coadaptation": dict(u=[1.0, -2.0], scales=[0.5, 1.0]),
    "relu_capacity.dropout_regularizer": dict(U=W2, V=W1, X=X2, lam=0.5),
    "relu_capacity.enumerated_dropout_loss": dict(U=W2, V=W1, X=X2, Y=Y1, retain=0.5),
    "relu_capacity.path_regularizer": dict(U=W2, V=W1, lam=0.5),
    "relu_capacity.gaussian_relu_moment": dict(v=np.array([1.0, -0.5]), mean=np.array([0.5, 0.2]), cov=SYM),
    "relu_capacity.gaussian_retentivity": dict(mean=np.array([0.5, 0.2]), cov=SYM),
    "relu_capacity.retentivity_ratio": dict(v=np.array([1.0, -0.5]), Z=X2, weights=np.full(4, 0.25)),
    "relu_capacity.proposition2_atoms": dict(delta=0.1),
    "relu_capacity.retentivity_2d": dict(Z=X2, weights=np.full(4, 0.25)),
    "relu_capacity.mahalanobis_norm": dict(X=X2, S=SYM),
    "relu_capacity.linear_class_sup": dict(X=X2, S=SYM, signs=np.array([[1.0, -1.0, 1.0, 1.0]])),
    "relu_capacity.relu_ratio": dict(v=np.array([[1.0, -0.5], [0.2, 1.0]]), X=X2, signs=np.array([[1.0, -1.0, 1.0, 1.0]]),
                            Z=X2, weights=np.full(4, 0.25)),
    "relu_capacity.relu_rademacher_2d": dict(X=X2, Z=X2, weights=np.full(4, 0.25), signs=np.array([[1.0, -1.0, 1.0, 1.0]])),
    "relu_capacity.linear_as_relu": dict(w=np.array([1.0, -0.5]), width=4),
    "relu_capacity.finite_class_rademacher": dict(G=np.array([[1.0, -1.0, 0.5], [0.0, 1.0, -1.0]])),
    # sensing (M: 2 × 3, U: 2 × 2, V: 3 × 2; three measurements)
    "sensing.dropout_objective": dict(U=U, V=V, A=np.stack([M, 2 * M, -M]), y=np.array([1.0, 0.5, -0.2]), retain=0.5),
    "sensing.enumerated_dropout_loss": dict(U=U, V=V, A=np.stack([M, 2 * M, -M]), y=np.array([1.0, 0.5, -0.2]),
                                            retain=0.5),
    "sensing.sampled_dropout_losses": dict(U=U, V=V, A=np.stack([M, 2 * M, -M]), y=np.array([1.0, 0.5, -0.2]),
                                           retain=0.5, masks=np.array([[1.0, 0.0], [1.0, 1.0]])),
    "sensing.completion_measurements": dict(rows=[0, 1, 1], cols=[2, 0, 1], shape=(2, 3)),
    "sensing.population_regularizer": dict(U=U, V=V, p=[0.4, 0.6], q=[0.2, 0.3, 0.5]),
    "sensing.weighted_nuclear_norm": dict(M=M, p=[0.4, 0.6], q=[0.2, 0.3, 0.5]),
    "sensing.induced_regularizer": dict(M=M, width=2, p=[0.4, 0.6], q=[0.2, 0.3, 0.5]),
    "sensing.equalized_sensing_factors": dict(M=M, width=2, p=[0.4, 0.6], q=[0.2, 0.3, 0.5]),
    "sensing.zipf_marginal": dict(size=5, exponent=1.0, rng=rng(), uniform_weight=0.5),
    "sensing.sample_entries": dict(p=[0.4, 0.6], q=[0.2, 0.3, 0.5], n=4, rng=rng()),
    "sensing.nondegeneracy_ratio": dict(p=[0.4, 0.6], q=[0.2, 0.3, 0.5], n=100),
    "sensing.rating_biases": dict(rows=[0, 1, 1], cols=[2, 0, 1], values=[4.0, 3.0, 5.0], shape=(2, 3), ridge=0.5),
    "sensing.trace_norm_rate": dict(d1=100, n=1000, alpha=2.0),
    "sensing.rademacher_spectral_norms": dict(rows=[0, 1, 1], cols=[2, 0, 1], p=[0.4, 0.6], q=[0.2, 0.3, 0.5],
                                              signs=np.array([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]])),
    "sensing.theorem11_bound": dict(train_loss=0.1, alpha=2.0, n=1000, d1=100, delta=0.05),
    "sensing.clipped_gaussian_moments": dict(mean=M, sd=0.3),
    "sensing.completion_objective": dict(U=T(np.stack([U, U])), V=T(np.stack([V, V])), rows=[0, 1, 1], cols=[2, 0, 1],
                                         y=[0.5, -0.2, 0.1], lam=T([0.0, 1.0])),
    "sensing.completion_gradient": dict(U=T(np.stack([U, U])), V=T(np.stack([V, V])), rows=[0, 1, 1], cols=[2, 0, 1],
                                        y=[0.5, -0.2, 0.1], lam=[0.0, 1.0]),
    "sensing.completion_descent": dict(U0=T(np.stack([U, U])), V0=T(np.stack([V, V])), rows=[0, 1, 1], cols=[2, 0, 1],
                                       y=[0.5, -0.2, 0.1], lam=[0.0, 1.0], steps=2, lr=0.1),
    "sensing.input_dropout_regularizer": dict(M=M, A=np.stack([M, 2 * M, -M])),
    "sensing.enumerated_input_dropout_loss": dict(M=M, A=np.stack([M, 2 * M, -M]), y=np.array([1.0, 0.5, -0.2]),
                                                  retain=0.5),



    "relu_capacity.outputs": dict(u=np.array([1.0, -2.0]), V=V[:2], X=X2),
    "relu_capacity.clipped_squared_loss": dict(u=np.array([1.0, -2.0]), V=V[:2], X=X2, y=Y1[0]),
    "relu_capacity.symmetrized": dict(X=X2, rng=rng()),
    # datasets
    "datasets.package_file": dict(package="dropnb", relative="__init__.py", sha256=INIT_SHA),
    "datasets.movielens_100k": dict(verbose=False),
    "datasets.mnist_5k": dict(verbose=False),
    "datasets.random_split": dict(n=10, fractions=np.array([0.5, 0.3]), rng=rng()),
    # relu_decay
    "relu_decay.check_data": dict(X=X2, Y=Y1),
    "relu_decay.check_weights": dict(W1=W1, W2=W2, n0=2, n2=1),
    "relu_decay.hidden": dict(X=X2, W1=W1),
    "relu_decay.outputs": dict(X=X2, W1=W1, W2=W2),
    "relu_decay.unit_outputs": dict(X=X2, W1=W1, W2=W2),
    "relu_decay.unit_regularizers": dict(W1=W1, W2=W2),
    "relu_decay.regularizer": dict(W1=W1, W2=W2),
    "relu_decay.objective": dict(X=X2, Y=Y1, W1=W1, W2=W2, decay=0.1),
    "relu_decay.gradient": dict(X=X2, Y=Y1, W1=W1, W2=W2, decay=0.1),
    "relu_decay.dropout_penalty": dict(X=X2, W1=W1, W2=W2),
    "relu_decay.split_units": dict(W1=W1, W2=W2, shares=np.array([0.5, 0.5])),
    "relu_decay.gradient_descent": dict(X=X2, Y=Y1, W1=W1, W2=W2, decay=0.1, schedule=schedule(), every=1),
    "relu_decay.FlatPath.weights": dict(
        self=Fresh(lambda: relu_decay.flat_path(X2, np.hstack([W1, W1]), np.hstack([W2, -W2]))), tau=0.1),
    "relu_decay.flat_path": dict(X=X2, W1=np.hstack([W1, W1]), W2=np.hstack([W2, -W2]), units=[0, 3]),
    # relu_polar
    "relu_polar.direction": dict(angle=np.array([0.0, 1.0])),
    "relu_polar.breakpoint_angles": dict(X=X2),
    "relu_polar.arcs": dict(X=X2),
    "relu_polar.polar_curve": dict(X=X2, G=Y1, angles=np.array([0.0, 1.0])),
    "relu_polar.polar": dict(X=X2, G=Y1),
    "relu_polar.duality_gap_certificate": dict(X=X2, Y=Y1, Z=Y1 / 2, cost=0.5, decay=0.1),
    "relu_polar.network_certificate": dict(X=X2, Y=Y1, W1=W1, W2=W2, decay=0.1),
    "relu_polar.Reference.network": dict(
        self=Fresh(lambda: relu_polar.sector_reference(X2, Y1, 0.1, tol=1e-6)), threshold=0.0, merge=True),
    "relu_polar.Reference.active_groups": dict(
        self=Fresh(lambda: relu_polar.sector_reference(X2, Y1, 0.1, tol=1e-6)), threshold=0.0),
    "relu_polar.sector_reference": dict(X=X2, y=Y1[0], decay=0.1, tol=1e-6, max_iter=2000, check_every=50),
    "relu_polar.conic_reference": dict(X=X2, y=Y1[0], decay=0.1, tol=1e-8),
    "relu_polar.relu_dictionary": dict(X=X2, n_angles=8),
    "relu_polar.largest_gap": dict(angles=np.array([0.0, 1.0, 3.0])),
    "relu_polar.InducedRegularizer.network": dict(
        self=Fresh(lambda: relu_polar.induced_regularizer(X2, Y1[0], n_angles=64))),
    "relu_polar.induced_regularizer": dict(X=X2, z=Y1[0], n_angles=64),
    "relu_polar.escape": dict(X=X2, Y=Y1, W1=W1, W2=W2, decay=0.1),
    "relu_polar.MetaRun.certified": dict(
        self=Fresh(lambda: relu_polar.meta_algorithm(X2, Y1, W1[None], W2[None], 0.1, schedule(),
                                                            schedule(), accuracy=0.1, rounds=1)), accuracy=0.1),
    "relu_polar.meta_algorithm": dict(X=X2, Y=Y1, W1=W1[None], W2=W2[None], decay=0.1, schedule=schedule(),
                                      escape_schedule=schedule(), accuracy=0.1, rounds=1),
    "relu_polar.non_increasing_path": dict(X=X2, Y=Y1, W1=W1, W2=W2, decay=0.1, cycle_schedule=schedule(),
                                           final_schedule=schedule(), cycles=1, points=3, every=1),
    # landscape
    "landscape.assembled_hessian": dict(product=lambda D: (2 * D,), shapes=[(2, 2)]),
    "landscape.tied_objective": dict(M=SYM, U=U, lam=0.5),
    "landscape.tied_gradient": dict(M=SYM, U=U, lam=0.5),
    "landscape.tied_hessian_product": dict(M=SYM, U=U, lam=0.5, D=U),
    "landscape.tied_hessian": dict(M=SYM, U=U, lam=0.5),
    "landscape.untied_objective": dict(M=M, U=U, V=V, lam=0.5),
    "landscape.untied_gradient": dict(M=M, U=U, V=V, lam=0.5),
    "landscape.untied_hessian_product": dict(M=M, U=U, V=V, lam=0.5, DU=U, DV=V),
    "landscape.untied_hessian": dict(M=M, U=U, V=V, lam=0.5),
    "landscape.equalized_critical_points": dict(M=SYM, width=2, lam=0.5),
    "landscape.critical_point_search": dict(gradient=lambda x: 2 * x, hessian=lambda x: 2 * np.eye(len(x)),
                                            starts=np.ones((2, 2)), gtol=1e-8),
    # linear
    "linear.check_factors": dict(U=U, V=V, S=S),
    "linear.check_network": dict(M=M, U=U, V=V, S=S),
    "linear.expected_loss": dict(M=M, U=U, V=V, S=S),
    "linear.regularizer": dict(U=U, V=V, mask=BERNOULLI, S=S),
    "linear.bernoulli_regularizer": dict(U=U, V=V, retain=0.5, S=S),
    "linear.dropout_lambda": dict(retain=0.5),
    "linear.path_norm_squared": dict(U=U, V=V),
    "linear.objective": dict(M=M, U=U, V=V, mask=BERNOULLI, S=S),
    "linear.enumerated_objective": dict(M=M, U=U, V=V, mask=BERNOULLI, S=S),
    "linear.sampled_losses": dict(M=M, U=U, V=V, x=np.ones((4, 3)), b=np.ones((4, 2)), mean=np.full(2, 0.5)),
    "linear.monte_carlo_objective": dict(M=M, U=U, V=V, mask=BERNOULLI, draw_inputs=lambda n, g: g.standard_normal((n, 3)),
                                         samples=10, rng=rng()),
    "linear.objective_gradient": dict(M=M, U=U, V=V, mask=BERNOULLI, S=S),
    "linear.algorithm1_directions": dict(U=U, V=V, x=np.ones((4, 3)), y=np.ones((4, 2)), b=np.ones((4, 2)),
                                         mean=np.full(2, 0.5)),
    "linear.check_batched": dict(M=TORCH_M, U=TORCH_U, V=TORCH_V, cbar=T(np.eye(2)), S=TORCH_S),
    "linear.batched_objective": dict(M=TORCH_M, U=TORCH_U, V=TORCH_V, cbar=T(np.eye(2)), S=TORCH_S),
    "linear.flat_objective": dict(M=M, width=2, lam=0.5, tied=False, mask=BERNOULLI, S=S),
    "linear.column_rotation": dict(U=TORCH_U, i=0, j=1, t=T(0.5)),
    # masks
    "masks.Bernoulli": dict(width=3, retain=0.5),
    "masks.Bernoulli.sample": dict(self=BERNOULLI, shape=(4,), rng=rng()),
    "masks.Bernoulli.sample_torch": dict(self=BERNOULLI, shape=(4,), generator=tgen()),
    "masks.Bernoulli.support_size": dict(self=BERNOULLI),
    "masks.MaskDistribution.sample": dict(self=BERNOULLI, shape=(4,), rng=rng()),
    "masks.MaskDistribution.sample_torch": dict(self=BERNOULLI, shape=(4,), generator=tgen()),
    "masks.MaskDistribution.support_size": dict(self=BERNOULLI),
    "masks.MaskDistribution.enumerate": dict(self=BERNOULLI),
    "masks.Blocks": dict(width=4, block_size=2, retain=0.5),
    "masks.PerRun": dict(masks=[masks.Bernoulli(3, 0.5), masks.Bernoulli(3, 0.8)]),
    "masks.PerRun.sample_torch": dict(self=masks.PerRun([masks.Bernoulli(3, 0.5), masks.Bernoulli(3, 0.8)]),
                                      shape=(2, 4), generator=tgen()),
    "masks.Blocks.sample": dict(self=masks.Blocks(4, 2, 0.5), shape=(4,), rng=rng()),
    "masks.Blocks.sample_torch": dict(self=masks.Blocks(4, 2, 0.5), shape=(4,), generator=tgen()),
    "masks.Blocks.support_size": dict(self=masks.Blocks(4, 2, 0.5)),
    "masks.Finite": dict(patterns=np.array([[1.0, 0.0], [0.0, 1.0]]), probs=np.array([0.5, 0.5])),
    "masks.Finite.sample": dict(self=masks.Finite(np.eye(2), [0.5, 0.5]), shape=(4,), rng=rng()),
    "masks.Finite.sample_torch": dict(self=masks.Finite(np.eye(2), [0.5, 0.5]), shape=(4,), generator=tgen()),
    "masks.Finite.support_size": dict(self=masks.Finite(np.eye(2), [0.5, 0.5])),
    "masks.sliding_window_retain": dict(seed_probability=0.5, window=3, expansion="keep"),
    "masks.sliding_window_seed_probability": dict(retain=0.5, window=3, expansion="keep"),
    "masks.SlidingWindow": dict(width=4, window=3, retain=0.5, expansion="keep"),
    "masks.SlidingWindow.from_seed_probability": dict(width=4, window=3, seed_probability=0.5, expansion="keep"),
    "masks.SlidingWindow.sample": dict(self=masks.SlidingWindow(4, 3, 0.5, "keep"), shape=(4,), rng=rng()),
    "masks.SlidingWindow.sample_torch": dict(self=masks.SlidingWindow(4, 3, 0.5, "keep"), shape=(4,), generator=tgen()),
    "masks.SlidingWindow.support_size": dict(self=masks.SlidingWindow(4, 3, 0.5, "keep")),
    # networks
    "networks.check_moments": dict(moments=MOMENTS),
    "networks.moments": dict(X=X2, Y=Y1),
    "networks.shallow_risk": dict(moments=MOMENTS, U=SYM, V=V),
    "networks.shallow_gradient": dict(moments=MOMENTS, U=SYM, V=V),
    "networks.shallow_hessian": dict(moments=MOMENTS, U=SYM, V=V),
    "networks.key_matrix": dict(moments=MOMENTS),
    "networks.shallow_critical_points": dict(moments=MOMENTS, width=1, C=np.eye(1)),
    "networks.critical_value": dict(moments=MOMENTS, subset=(0,)),
    "networks.empirical_optimum": dict(X=X2, Y=Y1, width=1),
    "networks.deep_risk": dict(moments=MOMENTS, layers=LAYERS),
    "networks.deep_flat_risk": dict(moments=MOMENTS, sizes=[3, 2, 2]),
    "networks.planted_moments": dict(n0=3, eigenvalues=np.array([2.0, 1.0]), rng=rng()),
    "networks.balanced_scalar_steps": dict(depth=2, scales=np.array([0.1, 0.2]), step=0.1, sxx=1.0, syx=1.0, level=0.5),
    # optimize
    "optimize.value_and_gradient": dict(fun=square, x=np.array([1.0, 2.0])),
    "optimize.hessian": dict(fun=square, x=np.array([1.0, 2.0])),
    "optimize.curve_second_derivative": dict(fun=square, curve=lambda t: torch.stack([t, 2 * t]), t=0.5),
    "optimize.FirstOrderCertificate.require_minimum": dict(self=Fresh(certificate)),
    "optimize.certify": dict(fun=square, x=np.array([0.0, 0.0])),
    "optimize.lbfgs": dict(fun=square, x0=np.array([1.0, 2.0]), gtol=1e-8, max_iter=100),
    "optimize.bisect": dict(f=lambda z: z - 0.3, low=0.0, high=1.0, bracket=1e-6),
    "optimize.newton_polish": dict(fun=square, x=np.array([1.0, 2.0]), steps=2),
    "optimize.minimize": dict(fun=square, x0=np.array([1.0, 2.0]), gtol=1e-8, max_iter=100, newton_steps=2),
    # plotting
    "plotting.use_style": dict(),
    # regression
    "regression.golden_record": dict(record=RECORD),
    "regression.write_golden": dict(chapter="page", records=[RECORD], folder=TMP),
    "regression.read_golden": dict(chapter="deep-linear", folder=GOLDENS),
    "regression.one_sided_band": dict(golden=RECORD),
    "regression.record_differences": dict(golden=RECORD, record=RECORD),
    "regression.differences": dict(golden=[RECORD], records=[RECORD]),
    "regression.compare_folder": dict(records_dir=TMP, chapters=[]),
    "regression.verdict": dict(chapter="page", problems=[]),
    # render
    "render.readable": dict(value=0.123456, digits=3),
    "render.show_numpy_scalars_plainly": dict(),
    "render.readable_text": dict(text="1e-3"),
    "render.plain": dict(text="a $x$"),
    "render.prose": dict(text="a $x$"),
    "render.basis_text": dict(basis="rounding"),
    "render.comparison_text": dict(r=RECORD),
    "render.is_estimate": dict(r=RECORD),
    "render.origin_text": dict(r=RECORD),
    "render.origin_label": dict(r=RECORD),
    "render.claim_block": dict(record=RECORD),
    "render.record_list": dict(r=RECORD),
    "render.claims_table": dict(records=[RECORD]),
    # rounding
    "rounding.roundoff_tolerance": dict(operations=100, unit=2.0**-24),
    "rounding.dropout_step_rounding": dict(width=16, dim=4, radius=2.0, distance=0.5, scale=1.0),
    "rounding.hessian_cutoff": dict(H=SYM),
    "rounding.deep_regularizer_operations": dict(sizes=[3, 2, 2]),
    "rounding.certified_linear_value": dict(certificate=Fresh(certificate), M=M, S=S, value=1.0),
    "rounding.certified_excursion": dict(value=1.1, floor=1.0, certificate=Fresh(certificate), M=M, S=S,
                                         extra_rounding=0.0),
    "rounding.linear_value_rounding": dict(M=M, width=2, value=1.0),
    "rounding.certified_factorization": dict(certificate=Fresh(certificate), U=U, V=V, M=M, value=1.0),
    "rounding.tied_gradient": dict(M=SYM, U=U, lam=0.5),
    "rounding.tied_value": dict(M=SYM, U=U, lam=0.5),
    "rounding.untied_gradient": dict(M=M, U=U, V=V, lam=0.5),
    "rounding.factorization_operations": dict(Y=M, U=U),
    "rounding.factorization_gradient": dict(Y=M, U=U, V=V, decay=0.5, residual_rounding=1e-12),
    "rounding.relu_gamma": dict(W1=W1, X=X2, extra=8),
    "rounding.relu_magnitude": dict(X=X2, W1=W1, W2=W2),
    "rounding.relu_value": dict(X=X2, Y=Y1, W1=W1, W2=W2, decay=0.1),
    "rounding.relu_gradient": dict(X=X2, Y=Y1, W1=W1, W2=W2, decay=0.1),
    # shrinkage
    "shrinkage.check_spectrum": dict(spectrum=SPECTRUM),
    "shrinkage.thresholds": dict(spectrum=SPECTRUM, width=2, lam=0.5),
    "shrinkage.support": dict(spectrum=SPECTRUM, width=2, lam=0.5),
    "shrinkage.breakpoints": dict(spectrum=SPECTRUM, width=2),
    "shrinkage.optimal_value": dict(spectrum=SPECTRUM, width=2, lam=0.5),
    "shrinkage.global_optimum": dict(M=M, width=2, lam=0.5),
    "shrinkage.tied_optimum": dict(M=SYM, width=2, lam=0.5),
    "shrinkage.reduced_value": dict(spectrum=SPECTRUM, width=2, lam=0.5, point=np.array([0.5, 0.2])),
    "shrinkage.reduced_lower_bound": dict(spectrum=SPECTRUM, width=2, lam=0.5, point=np.array([0.5, 0.2])),
    # stats
    "stats.StreamingMean": dict(),
    "stats.StreamingMean.add": dict(self=Fresh(stats.StreamingMean), samples=np.array([1.0, 2.0])),
    "stats.streaming_mean": dict(chunks=[np.array([1.0, 2.0]), np.array([3.0])]),
    "stats.chunk_sizes": dict(total=10, chunk=4),
    "stats.t_statistic": dict(differences=np.array([[1.0, 0.5, 0.7], [0.3, 0.2, 0.6]]), axis=1),
    "stats.t_critical": dict(count=10, level=1e-3),
    "stats.mean_and_error": dict(values=np.array([1.0, 0.5, 0.7])),
    "stats.mean_confidence_bound": dict(values=np.array([1.0, 0.5, 0.7]), level=1e-3, side="lower"),
    "stats.rank_correlation": dict(x=np.array([1.0, 3.0, 2.0, 5.0]), y=np.array([0.5, 0.7, 0.6, 2.0])),
    "stats.bootstrap_rank_correlation": dict(x=np.array([[1.0, 1.2], [2.0, 2.1], [3.0, 2.9], [4.0, 4.4]]),
                                             y=np.array([[0.1, 0.3], [0.5, 0.4], [0.9, 1.0], [1.2, 1.1]]), draws=50,
                                             rng=rng(), level=0.05),
    "stats.binomial_upper": dict(successes=3, trials=10, level=1e-3),
    "stats.spearman_critical": dict(count=5, level=0.05),
    "stats.sign_test_critical": dict(count=10, level=0.05),
    "stats.simultaneous_z": dict(count=10, level=1e-3),
    "stats.self_normalized_z": dict(differences=np.array([[1.0, -0.5], [0.3, 0.2]]), axis=0),
    "stats.loss_bias_z": dict(run=Fresh(lambda: engine.Run(steps=np.array([0, 1, 2]), metrics=dict(f=np.ones((3, 1))),
                                                           kept={}, final={}, losses=np.array([[1.5, 0.5, 1.2]]),
                                                           taken=2)), name="f"),
    # structured
    "structured.ksupport_candidates": dict(a=SPECTRUM, s=2),
    "structured.support_index": dict(a=SPECTRUM, s=2),
    "structured.ksupport_squared": dict(a=SPECTRUM, s=2),
    "structured.spectral_ksupport_squared": dict(A=M, s=2),
    "structured.ksupport_variational": dict(a=SPECTRUM, s=2),
    "structured.convex_objective": dict(m=SPECTRUM, a=SPECTRUM / 2, s=2, lam_bar=0.5),
    "structured.prox": dict(m=SPECTRUM, s=2, lam_bar=0.5),
    "structured.closed_form_candidates": dict(m=SPECTRUM, s=2, lam_bar=0.5),
    "structured.closed_form": dict(m=SPECTRUM, s=2, lam_bar=0.5),
    "structured.dropblock_bound": dict(M=M, S=S, width=4, block_size=2, retain=0.5),
    "structured.block_norms": dict(U=U, V=V, S=S, block_size=1),
    "structured.enumerated_penalty": dict(U=U, V=V, S=S, mask=BERNOULLI),
    "structured.duplicate": dict(U=U, V=V),
    "structured.balanced_replication": dict(U=U, V=V, S=S, block_size=1, copies=3),
    # threads
    "layout.book_root": dict(),
    "layout.claims_dir": dict(),
    "layout.pages": dict(),
    "layout.ledger": dict(),
    "layout.pages_with_claims": dict(),
    "layout.claim_ids": dict(page="regularizer"),
    "threads.threads_from_environment": dict(),
    "threads.thread_environment": dict(threads=2),
    "threads.set_defaults": dict(),
    # the training loops, each in the module of its model, and their shared checks
    "linear.check_moment": dict(S=S, d2=3),
    "linear.check_start": dict(M=M, U0=U[None], V0=V[None], mask=BERNOULLI),
    "linear.check_run": dict(generator=tgen(), progress=False, keep=True),
    "linear.input_sampler": dict(d2=3, runs=2, batch_size=2, input_factor=S, data=None, generator=tgen(),
                                 dtype=torch.float64),
    "checks.run_widths": dict(widths=np.array([1.0, 2.0]), runs=2, largest=2),
    "linear.objective_metrics": dict(M=M, mask=BERNOULLI, S=S),
    "sensing.completion_metrics": dict(sets=dict(train=RATINGS), retain=np.array([0.5, 0.8]), objective="train", chunk=64),
    "sensing.completion_sgd": dict(rows=RATINGS[0], cols=RATINGS[1], values=RATINGS[2], U0=V[None], V0=U[None],
                                    retain=0.5, widths=2, lr=0.01, epochs=2, batch_size=2, generator=tgen(),
                                    progress=False),
    "relu_capacity.relu_dropout_training": dict(X=X2, y=Y1[0], u0=np.array([[1.0, -0.5]]), V0=U[None], retain=0.5, widths=2,
                                           lr=0.01, epochs=2, batch_size=2, generator=tgen(), optimizer="sgd",
                                           progress=False),
    "relu_lazy.relu_classifier_sgd": dict(X=X2, labels=np.array([0.0, 1.0, 1.0, 0.0]), X_test=X2,
                                         labels_test=np.array([1.0, 0.0, 1.0, 0.0]), W0=U[None], A0=U[None],
                                         retain=0.5, lr=0.1, epochs=2, batch_size=2, generator=tgen(), fixed_masks=3,
                                         progress=False),
    "linear.algorithm1": dict(M=M, U0=U[None], V0=V[None], mask=BERNOULLI, lr=0.01, steps=3, generator=tgen(),
                                input_factor=S, batch_size=2, progress=False),
    "dropconnect.dropconnect_sgd": dict(M=M, U0=U[None], V0=V[None], retain=0.5, lr=0.01, steps=3, generator=tgen(),
                                     data=np.ones((3, 5)), batch_size=2, progress=False),
    "linear.expected_gradient_descent": dict(M=M, U0=U[None], V0=V[None], mask=BERNOULLI, lr=0.01, steps=3, S=S,
                                      progress=False),
    "deep.deep_metrics": dict(M=M, lam=0.5, S=S),
    "deep.deep_gradient_descent": dict(M=M, layers0=[W[None] for W in LAYERS], lam=0.5, lr=0.01, steps=3, S=S,
                                           progress=False),
    "deep.deep_dropout_sgd": dict(M=M, layers0=[W[None] for W in LAYERS], lam=0.5, lr=0.01, steps=3,
                                      generator=tgen(), batch_size=2, progress=False),
    # relu_lazy (network: m = 3 units in the plane, four inputs; Algorithm 4: R = 2 runs of m = 3 units in R^3)
    "relu_lazy.logistic": dict(z=np.array([-1.0, 0.0, 2.5]), base=2.0),
    "relu_lazy.logistic_slope": dict(z=np.array([-1.0, 0.0, 2.5]), base=2.0),
    "relu_lazy.network": dict(W=V, a=np.array([1.0, -1.0, 1.0]), X=X2, mask=np.array([[1.0, 0.0, 1.0, 1.0]] * 3)),
    "relu_lazy.sphere_margin_sampler": dict(dim=3, gap=0.2, runs=2, generator=tgen()),
    "relu_lazy.circle_law": dict(labelling=lambda phi: np.cos(2 * phi), points=24, gap=0.3),
    "relu_lazy.circle_sampler": dict(angles=CIRCLE[0], labels=CIRCLE[1], runs=2, generator=tgen()),
    "relu_lazy.arc_coverage": dict(angles=CIRCLE[0], bins=8),
    "relu_lazy.circle_margin": dict(angles=CIRCLE[0], labels=CIRCLE[1], bins=8, sides=8),
    "relu_lazy.bin_of": dict(W=V, bins=8),
    "relu_lazy.circle_tangent_margins": dict(angles=CIRCLE[0], labels=CIRCLE[1], xi=np.full((8, 2), 0.3), W1=V, retain=0.5,
                                            rng=rng()),
    "relu_lazy.largest_row_tail": dict(radius=2.5, dim=3, width=10),
    "relu_lazy.theorem14_constants": dict(gamma=0.1, width=1000.0, dim=2, eta=0.5, steps=np.array([100.0, 1000.0])),
    "relu_lazy.dropout_sgd": dict(sample=Fresh(lambda: relu_lazy.sphere_margin_sampler(3, 0.1, 2,
                                                                                     torch.Generator().manual_seed(1))),
                                 W1=T(np.stack([S, -S])), a=T([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]]), retain=0.5,
                                 eta=0.5, radius=5.0, steps=3, generator=tgen(), margin_map=T(np.full((2, 3, 3), 0.1)),
                                 competitor_scale=np.array([0.5, 1.0]), block=2, progress=False),
    # adversarial (a leaky-ReLU network of m = 3 units in the plane; Algorithms 5 and 6: R = 2 runs in R^3)
    "adversarial.leaky_relu": dict(z=np.array([-1.0, 0.0, 2.5]), alpha=0.5),
    "adversarial.reflected_logistic": dict(z=np.array([-1.0, 0.0, 2.5])),
    "adversarial.network": dict(W=V, a=np.array([1.0, -1.0, 1.0]), X=X2.T, alpha=0.5),
    "adversarial.worst_margin_plane": dict(W=np.array([[1.0, 0.5], [-0.3, 1.0], [0.2, -1.0]]),
                                           a=np.array([1.0, -1.0, 1.0]), x=np.array([1.0, 0.2]), y=1.0, alpha=0.5,
                                           radius=0.5),
    "adversarial.linear_worst_margin": dict(w=np.array([1.0, -0.5]), X=np.array([[1.0, 0.2], [0.3, -1.0]]),
                                            y=np.array([1.0, -1.0]), radius=0.3),
    "adversarial.pgd_attack": dict(W=T(np.stack([S, -S])), a=T([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]]),
                                   x=T(np.full((2, 2, 3), 0.5)), y=T([[1.0, -1.0], [1.0, 1.0]]), alpha=0.5,
                                   radius=0.3, eta=0.1, steps=3, loss="reflected", rule="raw", ball="l2", keep=True),
    "adversarial.adversarial_training": dict(
        sample=Fresh(lambda: relu_lazy.sphere_margin_sampler(3, 0.2, 2, torch.Generator().manual_seed(1))),
        W1=T(np.stack([S, -S])), a=T([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]]), alpha=0.5, radius=0.1, eta=0.3,
        steps=3, generator=tgen(), attack_rate=1.0, attack_steps=3, accuracy=0.1, direction=T([1.0, 0.0, 0.0]),
        margin=0.2, loss="reflected", keep=False, progress=False),
    "adversarial.multiclass_pgd": dict(W=np.array([[2.0, 0.0], [1.0, 0.0], [0.0, 10.0]]), x=np.array([1.0, 0.0]), y=0,
                                       radius=0.3, step=0.05, steps=4, loss="cross-entropy"),
    "adversarial.beta_certificate": dict(W=V, a=np.array([1.0, -1.0, 1.0]), X=X2.T, y=np.array([1.0, -1.0, 1.0, 1.0]),
                                         alpha=0.5, radius=0.2, beta=0.05),
    "adversarial.grid_readings": dict(x=np.array([1.0, 0.8, 0.2]), y=0, radius=0.4, box=0.45, points=5, top=10,
                                      endpoints=True, block=2),
    "adversarial.lattice_flip_count": dict(x=np.array([1.0, 0.8, 0.2]), y=0, radius=0.4, box=0.45, points=5,
                                           endpoints=False),
    # two-layer networks on images: R = 2 runs, d = 3 inputs, m = 4 units, one output or three classes
    "classifiers.mlp_init": dict(runs=2, dim=3, width=4, outputs=1, generator=tgen(), dtype=torch.float64),
    "classifiers.conv_init": dict(runs=2, side=6, channels=3, kernel=2, outputs=4, generator=tgen(), dtype=torch.float32),
    "classifiers.classifier_logits": dict(params=Fresh(lambda: classifiers.mlp_init(2, 3, 4, 1, torch.Generator().manual_seed(1))),
                                   x=T(np.full((2, 2, 3), 0.5)), alpha=0.1),
    "classifiers.classifier_attack": dict(params=Fresh(lambda: classifiers.mlp_init(2, 3, 4, 3, torch.Generator().manual_seed(1))),
                                   x=T(np.full((2, 2, 3), 0.5)), y=T([[0.0, 2.0], [1.0, 1.0]]), alpha=0.1, radius=0.2,
                                   step=0.05, steps=2, loss="greedy", rule="sign", ball="linf", decay_every=1, decay=0.5,
                                   clip=(0.0, 1.0), restarts=1, generator=tgen()),
    "classifiers.classifier_train": dict(params=Fresh(lambda: classifiers.mlp_init(2, 3, 4, 1, torch.Generator().manual_seed(1))),
                                  X=T(np.array([[0.1, 0.9, 0.3], [0.8, 0.2, 0.5], [0.4, 0.4, 0.9]])),
                                  y=T([1.0, -1.0, 1.0]), alpha=0.1, lr=0.5, epochs=2, batch=2, generator=tgen(),
                                  lr_every=1, lr_decay=0.5,
                                  attack=dict(radius=0.1, step=0.05, steps=2, loss="reflected", rule="raw", ball="l2")),
})


# --- mutations ----------------------------------------------------------------------------------
PROBABILITIES = {"retain"}
CHOICES = {"kind", "expansion", "optimizer", "profile", "comparison"}


def kind_of(name: str, value) -> str | None:
    """The kind of an argument, which decides its bad values (None: not mutated)."""
    if isinstance(value, Fresh):
        value = value.make()
    if name in PROBABILITIES:
        return "probability"
    if isinstance(value, (bool, np.bool_)):
        return "flag"
    if isinstance(value, (int, np.integer)):
        return "integer"
    if isinstance(value, (float, np.floating)):
        return "number"
    if isinstance(value, torch.Tensor):
        return "tensor" if value.ndim else "scalar tensor"
    if isinstance(value, np.ndarray):
        return "array"
    if isinstance(value, np.random.Generator):
        return "rng"
    if isinstance(value, torch.Generator):
        return "torch generator"
    if isinstance(value, str):
        return "choice" if name in CHOICES else "text"
    if isinstance(value, masks.MaskDistribution):
        return "mask"
    if isinstance(value, engine.Schedule):
        return "schedule"
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (np.ndarray, torch.Tensor)) for v in value):
        return "arrays"
    if callable(value):
        return "function"
    return None


def _wider(a):
    """One more entry along the last axis."""
    if isinstance(a, torch.Tensor):
        return torch.cat([a, a[..., :1]], dim=-1)
    return np.concatenate([a, a[..., :1]], axis=-1)


def _other_ndim(a):
    """One dimension fewer (flattened), or one more for a vector."""
    return a.reshape(-1)[:, None] if a.ndim <= 1 else a.reshape(-1)


def _with_entry(a, entry):
    b = (a.clone() if isinstance(a, torch.Tensor) else np.array(a, dtype=np.float64)).reshape(-1)
    b[0] = entry
    return b.reshape(a.shape)


def _complex(a):
    return a.to(torch.complex128) if isinstance(a, torch.Tensor) else np.asarray(a, dtype=np.complex128) + 1j


def _zero_d(a):
    return torch.tensor(1.0) if isinstance(a, torch.Tensor) else np.array(1.0)


def _empty(a):
    return a[..., :0] if a.ndim else a.reshape(0)


NUMBER = dict(nan=np.nan, inf=np.inf, minus_inf=-np.inf, complex=1 + 1j, string="1", bool=True)
ARRAY = dict(nan=lambda a: _with_entry(a, np.nan), inf=lambda a: _with_entry(a, np.inf), complex=_complex,
             string=lambda a: "1", zero_d=_zero_d, empty=_empty, wider=_wider, other_ndim=_other_ndim)
MUTATIONS = {
    "number": NUMBER,
    "probability": {**NUMBER, "zero": 0.0, "above_one": 1.5, "negative": -0.5, "one": 1.0},
    "integer": dict(bool=True, string="3", negative=-1, nan=np.nan, float=2.5, complex=2 + 0j, zero_d=np.array(3)),
    "flag": dict(string="yes", none=None),
    "array": ARRAY,
    "tensor": ARRAY,
    "scalar tensor": dict(nan=torch.tensor(np.nan), inf=torch.tensor(np.inf), complex=torch.tensor(0.5 + 1j),
                          string="0.5", bool=torch.tensor(True)),
    "rng": dict(none=None, seed=0),
    "torch generator": dict(none=None, seed=0),
    "choice": dict(unknown="nonsense", integer=3),
    "text": dict(integer=3),
    "mask": dict(none=None, string="bernoulli"),
    "schedule": dict(none=None, number=np.nan),
    "function": dict(none=None),
    "arrays": dict(nan=lambda a: [_with_entry(a[0], np.nan), *a[1:]], complex=lambda a: [_complex(a[0]), *a[1:]],
                   string=lambda a: "layers", empty=lambda a: [], one=lambda a: [a[0]],
                   wider=lambda a: [a[0], _wider(a[1]), *a[2:]]),
}

# (function, argument, mutation) → why the function accepts that value ("*": any function, any mutation).
ACCEPTED = {
    ("*", "retain", "one"): "θ = 1 (keep every unit: no dropout) is a valid retain probability",
    ("data.matrix_with_spectrum", "spectrum", "empty"): "no singular values: the zero matrix",
    ("relu_polar.direction", "angle", "zero_d"): "one angle gives one direction",
    ("relu_polar.polar_curve", "angles", "zero_d"): "one angle gives one value",
    ("linear.flat_objective", "mask", "none"): "mask is optional: None means Bernoulli dropout of weight lam",
    ("stats.self_normalized_z", "differences", "zero_d"): "a single difference d gives d/|d|",
    ("stats.self_normalized_z", "axis", "negative"): "numpy axes count from the end",
    ("stats.t_statistic", "axis", "negative"): "numpy axes count from the end",
    ("stats.streaming_mean", "chunks", "one"): "a single chunk is a valid stream",
    ("stats.streaming_mean", "chunks", "empty"): "no chunk: an empty estimate (its mean then refuses)",
    ("render.readable", "value", "nan"): "a renderer shows every real number: NaN reads 'NaN'",
    ("render.readable", "value", "inf"): "a renderer shows every real number: ∞ reads '∞'",
    ("render.readable", "value", "minus_inf"): "a renderer shows every real number: −∞ reads '−∞'",
    ("engine.to_numpy", "a", "nan"): "a conversion helper: a diverged metric is recorded as it is",
    ("engine.to_numpy", "a", "inf"): "a conversion helper: a diverged metric is recorded as it is",
    ("engine.to_numpy", "a", "zero_d"): "a conversion helper: any shape",
    ("engine.to_numpy", "a", "empty"): "a conversion helper: any shape",
    ("engine.to_numpy", "a", "wider"): "a conversion helper: any shape",
    ("engine.to_numpy", "a", "other_ndim"): "a conversion helper: any shape",
    ("config.Config.pick", "quick", "*"): "pick returns one of its arguments, which may be anything",
    ("config.Config.pick", "book", "*"): "pick returns one of its arguments, which may be anything",
    ("config.Config.pick", "full", "*"): "pick returns one of its arguments, which may be anything",
}
for _entry, _names in {
    "relu_polar.direction": ["angle"], "relu_polar.polar_curve": ["angles"],
}.items():
    for _name in _names:
        ACCEPTED[(_entry, _name, "empty")] = "angles of any shape, none included"
        ACCEPTED[(_entry, _name, "other_ndim")] = "angles of any shape"
        ACCEPTED[(_entry, _name, "wider")] = "angles of any shape"
# A 1-d array where a one-row matrix is expected (scalar outputs), or the reverse, is read as the same data.
for _entry, _name in [("relu_polar.duality_gap_certificate", "Y"), ("relu_polar.duality_gap_certificate", "Z"),
                      ("relu_polar.induced_regularizer", "z"), ("relu_polar.polar", "G"),
                      ("relu_polar.polar_curve", "G"), ("relu_polar.sector_reference", "y"),
                      ("relu_polar.conic_reference", "y"),
                      ("stats.StreamingMean.add", "samples"), ("stats.self_normalized_z", "differences")]:
    ACCEPTED[(_entry, _name, "other_ndim")] = "the same numbers in another layout are read as the same data"
# One more column, where that dimension is free (samples, width, a vector's length, a map's shape).
WIDER = {
    "samples or columns of data": ["data.second_moment:factor", "features.features:X", "features.spread_targets:onehot",
                                   "dropconnect.dropconnect_sgd:data", "relu_polar.arcs:X", "relu_polar.breakpoint_angles:X",
                                   "relu_decay.dropout_penalty:X", "relu_decay.flat_path:X", "relu_decay.hidden:X",
                                   "relu_decay.outputs:X", "relu_polar.relu_dictionary:X", "relu_decay.unit_outputs:X",
                                   "rounding.relu_gamma:X", "stats.StreamingMean.add:samples",
                                   "stats.self_normalized_z:differences", "engine.check_checkpoints:checkpoints",
                                   "stats.t_statistic:differences",
                                   "deep.sampled_regularizer:input_factor", "landscape.critical_point_search:starts",
                                   "relu_polar.largest_gap:angles", "rounding.relu_magnitude:X",
                                   "rounding.factorization_operations:Y", "stats.streaming_mean:chunks",
                                   "networks.balanced_scalar_steps:scales", "networks.planted_moments:eigenvalues"],
    "a matrix of any shape": ["deep.balanced_implementation:W", "equalizer.equalized_factors:P",
                              "factorization.balanced_factors:Z", "factorization.flat_objective:Y",
                              "factorization.optimal_factors:Y", "factorization.singular_value_threshold:Y",
                              "factorization.top_singular_triple:R", "shrinkage.global_optimum:M",
                              "structured.spectral_ksupport_squared:A", "rounding.linear_value_rounding:M"],
    "a vector of any length": ["deep.rank_one_implementation:u", "deep.rank_one_implementation:v",
                               "structured.ksupport_candidates:a", "structured.ksupport_squared:a",
                               "structured.ksupport_variational:a", "structured.support_index:a", "structured.prox:m",
                               "optimize.lbfgs:x0", "optimize.minimize:x0", "optimize.value_and_gradient:x",
                               "optimize.hessian:x", "optimize.certify:x", "optimize.newton_polish:x",
                               "checks.vector:value", "checks.real_array:value", "checks.matrix:value",
                               "checks.tensor:value"],
    "a network of any width r": ["equalizer.equalizer:U", "linear.column_rotation:U", "relu_decay.hidden:W1",
                                 "landscape.tied_gradient:U", "landscape.tied_hessian:U", "landscape.tied_objective:U",
                                 "rounding.tied_gradient:U", "rounding.tied_value:U", "masks.Finite:patterns",
                                 "rounding.relu_gamma:W1", "rounding.factorization_operations:U",
                                 "relu_capacity.activation_scales:V"],
    "a sample of any size n": ["relu_capacity.activation_scales:X", "relu_capacity.dropout_regularizer:X", "relu_capacity.mahalanobis_norm:X",
                               "relu_capacity.finite_class_rademacher:G", "relu_capacity.outputs:X", "relu_capacity.symmetrized:X",
                               "stats.mean_confidence_bound:values", "stats.mean_and_error:values"],
    "a linear function of any input dimension": ["relu_capacity.linear_as_relu:w"],
}
for _reason, _pairs in WIDER.items():
    for _pair in _pairs:
        _entry, _name = _pair.split(":")
        ACCEPTED[(_entry, _name, "wider")] = _reason
# The validators of dropnb.checks: ``name`` and the words of the requirement are labels put into the
# message (any object formats), and a bad ``value`` is reported under that label.
for _entry in [e for e in EXAMPLES if e.startswith("checks.")]:
    for _name in ("name", "requirement", "what", "options"):
        if _name in EXAMPLES[_entry]:
            ACCEPTED[(_entry, _name, "*")] = "a label written into the message"
for _mutation in ("zero_d", "wider", "other_ndim"):
    ACCEPTED[("sensing.clipped_gaussian_moments", "mean", _mutation)] = "elementwise: means of any shape"
for _entry in ("sensing.completion_objective", "sensing.completion_gradient", "sensing.completion_descent"):
    ACCEPTED[(_entry, "lam", "zero_d")] = "a 0-d array is one number, the same weight for all"
ACCEPTED[("checks.weights", "value", "zero_d")] = "a 0-d array is one number, the same weight for all"
ACCEPTED[("checks.per_run", "value", "zero_d")] = "a 0-d array is one number, the same for every run"
ACCEPTED[("checks.run_widths", "widths", "zero_d")] = "a 0-d array is one number, the same for every run"
ACCEPTED[("linear.check_start", "mask", "none")] = "mask is optional: None for DropConnect, which draws its own masks"
ACCEPTED[("adversarial.pgd_attack", "steps", "zero_d")] = "a 0-d array is one number, the same for every run"
ACCEPTED[("checks.error", "value", "*")] = "error formats any value into the message"
ACCEPTED[("checks.same_batch", "tensors", "float32")] = "batch sizes only (dtypes are checks.same_dtype's)"
ACCEPTED[("checks.environment_integer", "default", "*")] = "the caller's default, returned as given"
ACCEPTED[("checks.real_array", "value", "nan")] = "real_array checks the type only; matrix checks finiteness"
ACCEPTED[("checks.real_array", "value", "inf")] = "real_array checks the type only; matrix checks finiteness"
for _mutation in ("zero_d", "empty", "other_ndim"):
    ACCEPTED[("checks.real_array", "value", _mutation)] = "real_array checks the type only, any shape"
# relu_lazy: elementwise formulas take arrays of any shape, none included.
for _entry, _name in [("relu_lazy.logistic", "z"), ("relu_lazy.logistic_slope", "z"),
                      ("relu_lazy.theorem14_constants", "steps")]:
    for _mutation in ("zero_d", "empty", "wider", "other_ndim"):
        ACCEPTED[(_entry, _name, _mutation)] = "elementwise: an array of any shape, a single number or none"
ACCEPTED[("relu_lazy.arc_coverage", "angles", "wider")] = "one row per angle, for any number of angles"
ACCEPTED[("relu_lazy.dropout_sgd", "competitor_scale", "zero_d")] = "a 0-d array is one number, the same Λ for all"
# adversarial: elementwise formulas take arrays of any shape, none included.
for _entry in ("adversarial.leaky_relu", "adversarial.reflected_logistic"):
    for _mutation in ("zero_d", "empty", "wider", "other_ndim"):
        ACCEPTED[(_entry, "z", _mutation)] = "elementwise: an array of any shape, a single number or none"
# Tensors of another dtype that a function converts, as documented, to the dtype it computes in.
for _entry, _name in [("adversarial.pgd_attack", "W"), ("adversarial.pgd_attack", "x"),
                      ("classifiers.classifier_logits", "x"), ("classifiers.classifier_attack", "x"),
                      ("classifiers.classifier_train", "X")]:
    ACCEPTED[(_entry, _name, "float32")] = "moved to the dtype of the weights (W, or the parameters)"
for _entry, _name in [("adversarial.adversarial_training", "W1"), ("relu_lazy.dropout_sgd", "W1"),
                      ("relu_lazy.dropout_sgd", "margin_map")]:
    ACCEPTED[(_entry, _name, "float32")] = "converted to the function's dtype argument (float64 on a CPU)"



# Functions that set process-wide state (thread counts, environment, matplotlib style): called with
# that state restored afterwards, so that this test leaves the session as it found it.
GLOBAL_STATE = {"config.configure_threads", "threads.set_defaults", "plotting.use_style"}


@contextlib.contextmanager
def restored_global_state():
    import matplotlib as mpl
    import threadpoolctl

    threads, environment = torch.get_num_threads(), dict(os.environ)
    with threadpoolctl.threadpool_limits(limits=None), mpl.rc_context():
        try:
            yield
        finally:
            torch.set_num_threads(threads)
            os.environ.clear()
            os.environ.update(environment)


def arguments(kwargs: dict) -> dict:
    return {name: value.make() if isinstance(value, Fresh) else value for name, value in kwargs.items()}


def call(entry: str, kwargs: dict):
    module, name, *method = entry.split(".")
    target = getattr(importlib.import_module(MODULES[module]), name)
    kwargs = arguments(kwargs)
    if method:
        target = getattr(kwargs.pop("self") if "self" in kwargs else target, method[0])
    if entry in GLOBAL_STATE:
        with restored_global_state():
            return target(**kwargs)
    return target(**kwargs)


def mutated_calls(entry: str):
    """(argument, mutation, the example with that argument replaced) for every bad value."""
    for name, value in EXAMPLES[entry].items():
        kind = None if name == "self" else kind_of(name, value)
        for mutation, bad in MUTATIONS.get(kind, {}).items():
            if callable(bad) and kind in ("array", "tensor", "arrays"):
                original = value.make() if isinstance(value, Fresh) else value
                bad = bad(original)
            yield name, mutation, {**EXAMPLES[entry], name: bad}


MISMATCHES = ("float32", "batch")  # cross-argument mutations (mismatched_calls)


def _tensor_slots(kwargs: dict) -> list[tuple[str, object, torch.Tensor]]:
    """(argument, key or None, tensor) for each torch tensor with dimensions among the arguments: a
    tensor, or an entry of a list or dict of tensors (layers, classifier parameters)."""
    slots = []
    for name, value in kwargs.items():
        value = value.make() if isinstance(value, Fresh) else value
        if name == "self":
            continue
        if isinstance(value, torch.Tensor) and value.ndim:
            slots.append((name, None, value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            slots += [(name, index, v) for index, v in enumerate(value)]
        elif isinstance(value, dict) and value and all(isinstance(v, torch.Tensor) for v in value.values()):
            slots += [(name, key, v) for key, v in value.items()]
    return slots


def _replaced(kwargs: dict, name: str, key, new: torch.Tensor) -> dict:
    """The example with argument ``name`` (or its entry ``key``) replaced by ``new``."""
    if key is None:
        return {**kwargs, name: new}
    value = kwargs[name]
    make = value.make if isinstance(value, Fresh) else (lambda: value)

    def changed():
        made = make()
        if isinstance(made, dict):
            return {**made, key: new}
        return [new if index == key else v for index, v in enumerate(made)]
    return {**kwargs, name: Fresh(changed)}


def mismatched_calls(entry: str):
    """(argument, mutation, the example changed) for examples with two or more tensors: each float64
    tensor cast to float32 (``float32``), and each tensor in the batch of R runs that the examples'
    batched tensors (three or more dimensions) share given one run more (``batch``)."""
    kwargs = EXAMPLES[entry]
    slots = _tensor_slots(kwargs)
    if len(slots) < 2:
        return
    leading = [value.shape[0] for _, _, value in slots if value.ndim >= 3]
    runs = max(set(leading), key=leading.count) if leading else None
    in_batch = [value for _, _, value in slots if value.shape[0] == runs]
    for name, key, value in slots:
        if value.dtype == torch.float64:
            yield name, "float32", _replaced(kwargs, name, key, value.to(torch.float32))
        if len(in_batch) >= 2 and any(value is other for other in in_batch):
            yield name, "batch", _replaced(kwargs, name, key, torch.cat([value, value[:1]]))


def accepted_reason(entry: str, name: str, mutation: str) -> str | None:
    return (ACCEPTED.get((entry, name, mutation)) or ACCEPTED.get(("*", name, mutation))
            or ACCEPTED.get((entry, name, "*")))


def label(entry: str, name: str, kwargs: dict) -> str:
    """The name the message must hold: the argument's, or for a validator of dropnb.checks the label
    it was given for its value."""
    if entry.startswith("checks.") and name == "value":
        return kwargs.get("name", "value")
    if entry.startswith("checks.same_") and name == "tensors":  # the first tensor, the one compared with
        tensors = kwargs[name].make() if isinstance(kwargs[name], Fresh) else kwargs[name]
        return next(iter(tensors))
    return name


def names_argument(message: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", message) is not None


def check_bad_input(entry: str, calls=mutated_calls) -> list[str]:
    """The problems of one function with bad input (empty: every bad value refused or listed)."""
    problems = []
    for name, mutation, kwargs in calls(entry):
        reason = accepted_reason(entry, name, mutation)
        try:
            call(entry, kwargs)
        except (ValueError, TypeError) as error:
            if reason:
                problems.append(f"{name} {mutation}: listed as accepted ({reason}) but refused: {error}")
            elif not names_argument(str(error), label(entry, name, kwargs)):
                problems.append(f"{name} {mutation}: the message does not name {name!r}: {type(error).__name__}: {error}")
        except Exception as error:  # noqa: BLE001 - any other exception is a finding
            problems.append(f"{name} {mutation}: {type(error).__name__} (not ValueError/TypeError): {error}")
        else:
            if not reason:
                problems.append(f"{name} {mutation}: accepted")
    return problems


ENTRIES = sorted(EXAMPLES)


def test_every_public_function_has_an_example():
    entries = set(public_entries())
    missing = sorted(entries - set(EXAMPLES) - set(OUT_OF_SCOPE))
    assert not missing, f"public functions without an example in EXAMPLES (add one, or list them in OUT_OF_SCOPE): {missing}"
    stale = sorted((set(EXAMPLES) | set(OUT_OF_SCOPE)) - entries)
    assert not stale, f"EXAMPLES or OUT_OF_SCOPE name functions that are gone: {stale}"


def test_only_modules_of_the_book_are_out_of_scope():
    assert set(OUT_OF_SCOPE_MODULES) <= {short for short, dotted in MODULES.items() if dotted.startswith("dropnb.book.")}


def test_accepted_entries_name_real_mutations():
    kinds = {mutation for table in MUTATIONS.values() for mutation in table} | set(MISMATCHES)
    for (entry, name, mutation), reason in ACCEPTED.items():
        assert entry == "*" or name in EXAMPLES[entry], (entry, name)
        assert (mutation in kinds or mutation == "*") and reason


@pytest.mark.parametrize("entry", ENTRIES)
def test_the_example_is_valid(entry):
    call(entry, EXAMPLES[entry])


@pytest.mark.parametrize("entry", ENTRIES)
def test_bad_input_is_refused_with_the_argument_named(entry):
    problems = check_bad_input(entry)
    assert not problems, f"{entry}:\n" + "\n".join(problems)


MISMATCHED = [entry for entry in ENTRIES if any(True for _ in mismatched_calls(entry))]


def test_mismatched_tensors_are_generated():
    """The batched torch functions are among those whose tensors are made to disagree."""
    assert {"deep.batched_objective", "linear.batched_objective", "dropconnect.batched_objective",
            "features.features", "sensing.completion_gradient", "classifiers.classifier_logits",
            "adversarial.pgd_attack", "relu_lazy.dropout_sgd"} <= set(MISMATCHED)


@pytest.mark.parametrize("entry", MISMATCHED)
def test_mismatched_batch_or_dtype_is_refused_with_the_argument_named(entry):
    problems = check_bad_input(entry, mismatched_calls)
    assert not problems, f"{entry}:\n" + "\n".join(problems)
