"""Every chapter executes at the quick profile, every claim holds, and the claims can fail.

The records and executed notebooks come from the one quick build of the session (conftest);
the planted bugs run the chapter again from the cell where the bug first acts, up to the first
failing claim (dropnb.planted: forks of one clean run per chapter).
"""

import json
import os

import pytest

from dropnb.claims import load_records
from dropnb import planted
from dropnb.notebooks import LEDGER, Job, chapters_with_claims, run_job

pytestmark = pytest.mark.chapters
REQUIRED_FIELDS = {"id", "chapter", "page", "source", "statement", "measured", "target", "comparison",
                   "tolerance", "passed", "profile", "seed", "seconds"}


def ledger(name):
    return json.loads(LEDGER.read_text())[name]


@pytest.fixture(params=chapters_with_claims())
def records(request, quick_build):
    """(chapter name, its records from the quick build)."""
    return request.param, load_records(quick_build.claims, [request.param]).get(request.param, [])


def test_every_claim_holds_at_quick(records):
    name, rs = records
    assert rs, f"chapter {name} recorded no claim"
    for record in rs:
        assert REQUIRED_FIELDS <= record.keys()
        assert record["page"] == name and record["id"].startswith(record["chapter"] + ".")
        assert record["profile"] == "quick"
        assert record["passed"], record["id"]


def test_claim_ids_equal_the_ledger(records):
    name, rs = records
    assert [r["id"] for r in rs] == ledger(name)


def test_every_claim_is_glued(records, quick_build):
    """myst-nb keeps what a chapter glued beside its executed notebook, in <chapter>.glue.json."""
    name, rs = records
    glued = json.loads((quick_build.executed / f"{name}.glue.json").read_text())
    assert {r["id"] for r in rs} <= glued.keys()


# Each planted bug runs before the chapter (private names: the kernel namespace is shared with
# the chapter); the named claim must be the first to fail.
PLANTED_BUGS = {
    "gradient descent without the dropout term of the V-gradient": (
        "equalization-training",
        "import inspect, dropnb.training as _T\n"
        "exec(inspect.getsource(_T.gradient_descent).replace(' + 2 * SV @ (cbar * (U.transpose(1, 2) @ U))', ''),"
        " _T.__dict__)",
        "equalization.figure3.gd-step",
    ),
    "a division by the hidden activations in Algorithm 1's Figure 3 runs": (
        "equalization-training",
        "import inspect, dropnb.training as _T\n"
        "exec(inspect.getsource(_T.algorithm1).replace('b * torch.bmm(x, V)', 'b / torch.bmm(x, V)'), _T.__dict__)",
        "equalization.figure3.sgd-progress",
    ),
    "an infinite-variance uniform input law": (
        "regularizer",
        "import numpy as np, dropnb.data as _D\n"
        "_isotropic = _D.isotropic_inputs\n"
        "def _buggy_inputs(kind, n, d, rng):\n"
        "    if kind == 'uniform':\n"
        "        return np.sqrt(3.0) / rng.uniform(-1.0, 1.0, size=(n, d))\n"
        "    return _isotropic(kind, n, d, rng)\n"
        "_D.isotropic_inputs = _buggy_inputs",
        "regularizer.input-laws.second-moment",
    ),
    "a division by the hidden activations in Algorithm 1's engine": (
        "regularizer",
        "import inspect, dropnb.training as _T\n"
        "exec(inspect.getsource(_T.algorithm1).replace('b * torch.bmm(x, V)', 'b / torch.bmm(x, V)'), _T.__dict__)",
        "regularizer.alg1.engine-step",
    ),
    "regularizer without its weight λ": (
        "regularizer",
        "import numpy as np, dropnb.masks as m\n"
        "m.Bernoulli.characteristic = property(lambda self: np.eye(self.width))",
        "regularizer.lemma-a1.enumeration",
    ),
    "θ in place of 1/θ in the thinned network": (
        "regularizer",
        "import numpy as np, dropnb.linear as L\n"
        "def _buggy_losses(M, U, V, x, b, mean):\n"
        "    residual = x @ M.T - ((x @ V) * (b * mean)) @ U.T\n"
        "    return np.sum(residual**2, axis=1)\n"
        "L.sampled_losses = _buggy_losses",
        "regularizer.lemma-a1.monte-carlo.gaussian",
    ),
    "a factor 2 missing in the regularizer's gradient": (
        "regularizer",
        "import numpy as np, dropnb.linear as L\n"
        "_true_gradient = L.objective_gradient\n"
        "def _buggy_gradient(M, U, V, mask, S=None):\n"
        "    g_u, g_v = _true_gradient(M, U, V, mask, S)\n"
        "    S_ = np.eye(V.shape[0]) if S is None else S\n"
        "    return g_u - U @ (mask.characteristic * (V.T @ S_ @ V)), g_v\n"
        "L.objective_gradient = _buggy_gradient",
        "regularizer.alg1.expected-direction.theta-0.5",
    ),
    "the path norm summed over |uⱼᵢvₖᵢ| instead of the squares": (
        "regularizer",
        "import numpy as np, dropnb.linear as L\n"
        "L.path_norm_squared = lambda U, V: float(np.sum(np.abs(U[:, :, None] * V.T[None, :, :])))",
        "regularizer.path-norm",
    ),
    "the printed thresholds 1 + λj of Algorithm 3": (
        "equalization",
        "import numpy as np, dropnb.shrinkage as S\n"
        "def _printed_thresholds(spectrum, width, lam):\n"
        "    s = np.concatenate([spectrum, np.zeros(width)])[:width]\n"
        "    return lam * np.cumsum(s) / (1 + lam * np.arange(1, width + 1))\n"
        "S.thresholds = _printed_thresholds",
        "equalization.lemma-a2.sherman-morrison",
    ),
    "an unnormalised sum of eigenvectors in the equalizer": (
        "equalization",
        "import numpy as np, dropnb.equalizer as E\n"
        "_reflector = E._reflector_with_first_column\n"
        "E._reflector_with_first_column = lambda w: _reflector(w * np.sqrt(len(w)))",
        "equalization.equalizer.scales",
    ),
    "squared norms in the importance scores": (
        "equalization",
        "import numpy as np, dropnb.equalizer as E\n"
        "E.importance_scores = lambda U, V: np.sum(np.asarray(U)**2, axis=-2) * np.sum(np.asarray(V)**2, axis=-2)",
        "equalization.optimum.rho-below-r.scores",
    ),
    "the tail Σ_{i>ρ}σᵢ² left out of f*": (
        "equalization",
        "import numpy as np, dropnb.shrinkage as S\n"
        "def _headless_value(spectrum, width, lam):\n"
        "    rho, _ = S.support(spectrum, width, lam)\n"
        "    return float(lam * np.sum(spectrum[:rho]) ** 2 / (width + lam * rho))\n"
        "S.optimal_value = _headless_value",
        "equalization.tied.value-lam-0.05",
    ),
    "the spectrum shrunk by 2τ in the assembled optimum": (
        "equalization-beyond",
        "import dataclasses, dropnb.shrinkage as S\n"
        "_assemble = S._optimum\n"
        "def _double_shrink(W, s, Y, width, lam):\n"
        "    o = _assemble(W, s, Y, width, lam)\n"
        "    k = o.rank\n"
        "    return dataclasses.replace(o, product=(W[:, :k] * (s[:k] - 2 * o.threshold)) @ Y[:, :k].T)\n"
        "S._optimum = _double_shrink",
        "equalization.phase.eckart-young",
    ),
    "the dropout penalty halved in the objective tracked during training": (
        "equalization-training",
        "import copy, dropnb.training as T\n"
        "_metrics = T.objective_metrics\n"
        "def _halved(mask):\n"
        "    half = copy.copy(mask)\n"
        "    parent = type(mask)\n"
        "    half.__class__ = type('Halved', (parent,), {'characteristic': property(lambda m: parent.characteristic.fget(m) / 2)})\n"
        "    return half\n"
        "T.objective_metrics = lambda M, mask, S=None: _metrics(M, _halved(mask), S)",
        "equalization.figure3.lower-bound",
    ),
    "the one-hidden-layer rate λ/d in place of ν": (
        "deep-linear",
        "import dropnb.deep as D\n"
        "D.effective_rate = lambda widths, lam: lam / min(widths)",
        "deep-linear.nu.closed-form",
    ),
    "λA in place of λ Diag(A) in the moment propagation": (
        "deep-linear",
        "import torch, dropnb.deep as D\n"
        "def _buggy_sub(layers, S=None):\n"
        "    k, first = len(layers) - 1, layers[0]\n"
        "    P = torch.zeros((k + 1, *first.shape[:-2], first.shape[-1], first.shape[-1]), dtype=first.dtype)\n"
        "    P[0] = torch.eye(first.shape[-1]) if S is None else S\n"
        "    for W in layers[:-1]:\n"
        "        P = W @ P @ W.transpose(-1, -2)\n"
        "        P = torch.cat([P[:1], P[1:] + P[:-1]])\n"
        "    return torch.movedim(((layers[-1] @ P[1:]) * layers[-1]).sum((-2, -1)), 0, -1)\n"
        "D.batched_sub_regularizers = _buggy_sub",
        "deep-linear.prop8.three-ways.3-2-3-2-2",
    ),
    "the cheap regularizer drops the input layer's units instead of the last hidden layer's": (
        "deep-linear",
        "import torch, dropnb.deep as _deep\n"
        "def _shifted(layers, lam, S=None):\n"
        "    first = layers[0]\n"
        "    P = torch.eye(first.shape[-1], dtype=first.dtype) if S is None else S\n"
        "    lam = torch.as_tensor(lam, dtype=first.dtype)[..., None]\n"
        "    for W in layers[:-1]:\n"
        "        P = P + torch.diag_embed(lam * torch.diagonal(P, dim1=-2, dim2=-1))\n"
        "        P = W @ P @ W.transpose(-1, -2)\n"
        "    out, product = layers[-1], _deep._product(layers)\n"
        "    SW = product.transpose(-1, -2) if S is None else S @ product.transpose(-1, -2)\n"
        "    return ((out @ P) * out).sum((-2, -1)) - (product * SW.transpose(-1, -2)).sum((-2, -1))\n"
        "_deep.batched_regularizer = _shifted",
        "deep-linear.lemma8.conjugate",
    ),
    "the training metrics take the singular values of the map without its last layer": (
        "deep-linear-training",
        "import torch, dropnb.training as _training\n"
        "_metrics = _training.deep_metrics\n"
        "def _short_metrics(M, lam, S=None):\n"
        "    inner = _metrics(M, lam, S)\n"
        "    def metrics(state):\n"
        "        out = dict(inner(state))\n"
        "        layers = [state[f'W{i + 1}'].double() for i in range(len(state))]\n"
        "        product = layers[0]\n"
        "        for W in layers[1:-1]:\n"
        "            product = W @ product\n"
        "        out['singular_values'] = torch.linalg.svdvals(product)\n"
        "        return out\n"
        "    return metrics\n"
        "_training.deep_metrics = _short_metrics",
        "deep-linear.figure33.gap-falls",
    ),
    "a step-size schedule in stages that keeps its first step size": (
        "deep-linear-training",
        "import dropnb.engine as E\n"
        "E.Schedule.stages = classmethod(lambda cls, pairs, name='schedule': cls.constant(\n"
        "    list(pairs)[0][0], sum(n for _, n in pairs)))",
        "deep-linear.figure33.gap-falls",
    ),
    "the printed rule ρ* = argmax of (11) in the s-support norm": (
        "structured",
        "import dropnb.structured as T\n"
        "T.ksupport_squared = lambda a, s: float(T.ksupport_candidates(a, s)[0].max())",
        "structured.ksupport.variational",
    ),
    "block norms without the input metric S^{1/2}": (
        "structured",
        "import dropnb.structured as T\n"
        "_block_norms = T.block_norms\n"
        "T.block_norms = lambda U, V, S, block_size: _block_norms(U, V, None, block_size)",
        "structured.lemma21.enumeration",
    ),
    "duplication that divides only U by √2 (Lemma 2.2 changes the map)": (
        "structured",
        "import numpy as np, dropnb.structured as T\n"
        "T.duplicate = lambda U, V: (np.hstack([U, U]) / np.sqrt(2), np.hstack([V, V]))",
        "structured.lemma22.halving",
    ),
    "the width-r dropout minimum without its rank-r truncation": (
        "structured-masks",
        "import dropnb.shrinkage as H\n"
        "_optimal_value = H.optimal_value\n"
        "H.optimal_value = lambda spectrum, width, lam: _optimal_value(spectrum, len(spectrum), lam * len(spectrum) / width)",
        "structured.proposition33.width-hypothesis",
    ),
    "the factor 2 of 2U Diag(uᵢᵀdᵢ) missing in the tied Hessian": (
        "landscape-dropout",
        "import numpy as np, dropnb.landscape as L\n"
        "def _buggy_product(M, U, lam, D):\n"
        "    Dt = np.swapaxes(D, -1, -2)\n"
        "    loss = (D @ U.T + U @ Dt) @ U + (U @ U.T - M) @ D\n"
        "    penalty = D * np.sum(U**2, axis=0) + U * np.einsum('ki,...ki->...i', U, D)[..., None, :]\n"
        "    return 4 * loss + 4 * lam * penalty\n"
        "L._tied_product = _buggy_product",
        "landscape-dropout.hessian.formula",
    ),
    "‖vᵢ‖² read as 2Σvᵢ in the penalty term of the untied gradient": (
        "landscape-dropout",
        "import numpy as np, dropnb.landscape as L\n"
        "def _buggy_untied_gradient(M, U, V, lam):\n"
        "    residual = U @ V.T - M\n"
        "    return (2 * residual @ V + 2 * lam * U * np.sum(V * 2, axis=0),\n"
        "            2 * residual.T @ U + 2 * lam * V * np.sum(U**2, axis=0))\n"
        "L.untied_gradient = _buggy_untied_gradient",
        "landscape-dropout.gradient.formula",
    ),
    "the untied search solving a wrong gradient (‖vᵢ‖² read as 2Σvᵢ) that the formula check misses": (
        "landscape-dropout",
        "import numpy as np, dropnb.landscape as L\n"
        "_search = L.critical_point_search\n"
        "def _wrong_untied_search(gradient, hessian, starts, gtol):\n"
        "    if np.shape(starts)[1] != 21:\n"
        "        return _search(gradient, hessian, starts, gtol)\n"
        "    def _wrong(x):  # the chapter's own M_untied and lam, as its untied gradient has them\n"
        "        U, V, lam = x[:12].reshape(4, 3), x[12:].reshape(3, 3), globals()['lam']\n"
        "        residual = U @ V.T - globals()['M_untied']\n"
        "        return np.concatenate([(2 * residual @ V + 2 * lam * U * np.sum(V * 2, axis=0)).ravel(),\n"
        "                               (2 * residual.T @ U + 2 * lam * V * np.sum(U**2, axis=0)).ravel()])\n"
        "    return _search(_wrong, hessian, starts, gtol)\n"
        "L.critical_point_search = _wrong_untied_search",
        "landscape-dropout.search.untied.reaches-minimum",
    ),
    "the regularizer λΣ‖uᵢ‖⁴ halved in the tied objective": (
        "landscape-dropout",
        "import numpy as np, dropnb.landscape as L\n"
        "L.tied_objective = lambda M, U, lam: float(np.sum((M - U @ U.T) ** 2) + lam / 2 * np.sum(np.sum(U**2, axis=0) ** 2))",
        "landscape-dropout.lemma-d2.decrease",
    ),
    "2U Diag(uᵢᵀdᵢ) divided instead of multiplied in the tied Hessian (toy)": (
        "landscape-dropout-toy",
        "import numpy as np, dropnb.landscape as L\n"
        "def _buggy_product(M, U, lam, D):\n"
        "    Dt = np.swapaxes(D, -1, -2)\n"
        "    loss = (D @ U.T + U @ Dt) @ U + (U @ U.T - M) @ D\n"
        "    penalty = D * np.sum(U**2, axis=0) + 2 * U / np.einsum('ki,...ki->...i', U, D)[..., None, :]\n"
        "    return 4 * loss + 4 * lam * penalty\n"
        "L._tied_product = _buggy_product",
        "landscape-dropout.toy.hessian",
    ),
    "the penalty term of the tied gradient with 2λ in place of 4λ": (
        "landscape-dropout-toy",
        "import numpy as np, dropnb.landscape as L\n"
        "L.tied_gradient = lambda M, U, lam: 4 * (U @ U.T - M) @ U + 2 * lam * U * np.sum(U**2, axis=0)",
        "landscape-dropout.toy.minimum",
    ),
    "the critical-point search returns its starts instead of its end points": (
        "landscape-dropout-toy",
        "import numpy as np, dropnb.landscape as L\n"
        "_search = L.critical_point_search\n"
        "def _returns_starts(gradient, hessian, starts, gtol):\n"
        "    found = _search(gradient, hessian, starts, gtol)\n"
        "    return [np.asarray(x0, dtype=float) for x0 in np.asarray(starts)[:len(found)]]\n"
        "L.critical_point_search = _returns_starts",
        "landscape-dropout.toy.search.no-other",
    ),
    "the curvature term of the shallow Hessian without its factor 2": (
        "landscape-networks",
        "import numpy as np, dropnb.networks as N\n"
        "def _buggy_product(Sxx, Sxy, U, V, DU, DV):\n"
        "    residual = U @ V.T @ Sxx - Sxy.T\n"
        "    change = (DU @ V.T + U @ np.swapaxes(DV, -1, -2)) @ Sxx\n"
        "    return (2 * change @ V + residual @ DV, 2 * np.swapaxes(change, -1, -2) @ U + residual.T @ DU)\n"
        "N._shallow_product = _buggy_product",
        "landscape-networks.theorem12.negative-count",
    ),
    "dropout's rate (1 − θ)/θ halved, so κ = (1 − θ)/(4θ)": (
        "landscape-networks-dropout",
        "import dropnb.linear as L\n"
        "L.dropout_lambda = lambda retain: (1 - retain) / (2 * retain)",
        "landscape-networks.dropout.mask-expectation",
    ),
    "the ReLU polar taken over the arc ends only": (
        "landscape-networks-homogeneous",
        "import numpy as np, dropnb.homogeneous as H\n"
        "def _ends_only(X, G, H=H):\n"
        "    start, _, _ = H.arcs(X)\n"
        "    values = H.polar_curve(X, G, start)\n"
        "    best = int(np.argmax(values))\n"
        "    return H.Polar(float(values[best]), float(start[best]), H.direction(start[best]))\n"
        "H.polar = _ends_only",
        "landscape-networks.theorem19.polar",
    ),
    "the dual value of the factorization's duality gap with a quarter of the squared norm of Q": (
        "landscape-networks-factorization",
        "import numpy as np, dropnb.factorization as F\n"
        "def _quarter_gap(Y, U, V, lam, kappa=0.0, _gap=F.duality_gap, np=np):\n"
        "    R = Y - U @ np.swapaxes(V, -1, -2)\n"
        "    sigma = np.linalg.svd(R, compute_uv=False)[..., 0]\n"
        "    scale = np.where(np.asarray(kappa) > 0, 1.0, np.minimum(1.0, lam / sigma))\n"
        "    return _gap(Y, U, V, lam, kappa) - 0.25 * np.sum((R * scale[..., None, None]) ** 2, axis=(-2, -1))\n"
        "F.duality_gap = _quarter_gap",
        "landscape-networks.theorem15.conjugate",
    ),
    "importance scores ‖uᵢ‖²‖vᵢ‖² in place of ‖uᵢ‖‖vᵢ‖, so the dropout penalty has degree 8": (
        "landscape-networks-dropout",
        "import numpy as np, dropnb.equalizer as E\n"
        "E.importance_scores = lambda U, V: np.sum(np.asarray(U) ** 2, axis=-2) * np.sum(np.asarray(V) ** 2, axis=-2)",
        "landscape-networks.dropout.split",
    ),
    "the convex bound of the dropout factorization without its κ‖Z‖²_*/r term": (
        "landscape-networks-dropout",
        "import inspect, dropnb.factorization as F\n"
        "exec(inspect.getsource(F.convex_objective).replace('if kappa > 0:', 'if kappa < 0:'), F.__dict__)",
        "landscape-networks.dropout.convex-bound-attained",
    ),
    "the dropout regularizer of a ReLU network without its weight λ": (
        "bounds-networks",
        "import inspect, dropnb.relu as _R\n"
        "exec(inspect.getsource(_R.dropout_regularizer).replace('float(lam * np.sum(', 'float(np.sum('), _R.__dict__)",
        "bounds.prop5.enumeration",
    ),
    "the Gaussian ReLU moment without its density term": (
        "bounds-networks",
        "import inspect, dropnb.relu as _R\n"
        "exec(inspect.getsource(_R.gaussian_relu_moment).replace(' + m * s * norm.pdf(t)', ''), _R.__dict__)",
        "bounds.prop6.shifted-closed-form",
    ),
    "the exact Rademacher supremum in the plane taken over the arc ends only": (
        "bounds-networks",
        "import inspect, dropnb.relu as _R\n"
        "exec(inspect.getsource(_R.relu_rademacher_2d).replace('for sign in (1.0, -1.0):', 'for sign in ():'),"
        " _R.__dict__)",
        "bounds.rademacher.grid",
    ),
    "the dropout penalty's factor 2/n halved in the batched completion gradient": (
        "bounds",
        "import inspect, dropnb.sensing as _S\n"
        "exec(inspect.getsource(_S._dense_gradient).replace('lam * (2 / n) * U', 'lam * (1 / n) * U'), _S.__dict__)",
        "bounds.theorem11.gd-gradient",
    ),
    "the marginals p and q squared instead of square-rooted in the population penalty of completion": (
        "bounds",
        "import inspect, dropnb.sensing as _S\n"
        "exec(inspect.getsource(_S.population_regularizer).replace('(p @ U**2) * (q @ V**2)',"
        " '(p**2 @ U**2) * (q**2 @ V**2)'), _S.__dict__)",
        "bounds.prop4.completion-equalized-attains",
    ),
    "the closed-form dropout objective of matrix sensing without its weight λ": (
        "bounds",
        "import inspect, dropnb.sensing as _S\n"
        "exec(inspect.getsource(_S.dropout_objective).replace('loss + (1 - theta) / theta * reg', 'loss + reg'),"
        " _S.__dict__)",
        "bounds.prop3.gaussian-enumeration",
    ),
    "the clipped label's second moment without the noise variance inside the clipping window": (
        "bounds",
        "import inspect, dropnb.sensing as _S\n"
        "exec(inspect.getsource(_S.clipped_gaussian_moments).replace(' + sd**2 * (Pb - Pa + a * fa - b * fb)', ''),"
        " _S.__dict__)",
        "bounds.theorem11.population-estimates",
    ),
    "completion SGD keeps units without rescaling them by 1/θ": (
        "bounds-experiments",
        "import inspect, dropnb.training as _T\n"
        "exec(inspect.getsource(_T.completion_sgd).replace('(in_use.to(dtype) / tensor(retain)[:, None])[:, None, :]',"
        " 'in_use.to(dtype)[:, None, :]'), _T.__dict__)",
        "bounds.movielens.engine-objective",
    ),
    "the ReLU networks trained without their dropout masks": (
        "bounds-experiments",
        "import inspect, dropnb.training as _T\n"
        "exec(inspect.getsource(_T.relu_dropout_training).replace('hidden * masks * state', 'hidden * state'),"
        " _T.__dict__)",
        "bounds.mnist.coadaptation-falls-with-rate",
    ),
    "the logistic loss of the convergence chapter in natural log whatever its base": (
        "convergence",
        "import inspect, dropnb.twolayer as _W\n"
        "exec(inspect.getsource(_W.logistic).replace('value = np.logaddexp(0.0, -z) / math.log(base)',"
        " 'value = np.logaddexp(0.0, -z)'), _W.__dict__)",
        "convergence.loss.base2",
    ),
    "Algorithm 4's row step without the 1/√m of the network's gradient": (
        "convergence",
        "import inspect, dropnb.twolayer as _W\n"
        "exec(inspect.getsource(_W.dropout_sgd).replace('s = (eta * _slope_base2(z) * y / root)',"
        " 's = (eta * _slope_base2(z) * y)'), _W.__dict__)",
        "convergence.lemma12.step",
    ),
    "the arc coverage of the margin program without the arcs that wrap around angle 0": (
        "convergence",
        "import inspect, dropnb.twolayer as _W\n"
        "exec(inspect.getsource(_W.arc_coverage).replace('for shift in (-2 * np.pi, 0.0, 2 * np.pi):',"
        " 'for shift in (0.0,):'), _W.__dict__)",
        "convergence.margin.monte-carlo",
    ),
    "the classifier engine's gradient without the m^{-1/2} of the network": (
        "convergence-experiments",
        "import inspect, dropnb.training as _T\n"
        "exec(inspect.getsource(_T.relu_classifier_sgd).replace('residual *= scale / picked.shape[1]',"
        " 'residual *= 1 / picked.shape[1]'), _T.__dict__)",
        "convergence.engine.first-step",
    ),
    "the fixed sub-networks of Figure 5-3 scored without their masks": (
        "convergence-experiments",
        "import inspect, dropnb.training as _T\n"
        "exec(inspect.getsource(_T.relu_classifier_sgd).replace('top = (masks[..., None] * A',"
        " 'top = (torch.ones_like(masks[..., None], dtype=dtype) * A'), _T.__dict__)",
        "convergence.figure53.gap-shrinks-with-width",
    ),
    "the reflected loss without its minus sign, ln(1 + e^z)": (
        "adversarial",
        "import inspect, dropnb.adversarial as _A\n"
        "exec(inspect.getsource(_A.reflected_logistic).replace('value = -np.asarray(logistic(-z, base=math.e))',"
        " 'value = np.logaddexp(0.0, z)'), _A.__dict__)",
        "adversarial.loss.concave",
    ),
    "Algorithm 5 descending the reflected loss instead of ascending it": (
        "adversarial",
        "import inspect, dropnb.adversarial as _A\n"
        "exec(inspect.getsource(_A._pgd).replace('factor = -torch.sigmoid(z) if',"
        " 'factor = torch.sigmoid(z) if'), _A.__dict__)",
        "adversarial.reflection.sign",
    ),
    "Algorithm 6's outer step with the reflected loss's slope σ(z) instead of −ℓ'(z) = σ(−z)": (
        "adversarial",
        "import inspect, dropnb.adversarial as _A\n"
        "exec(inspect.getsource(_A.adversarial_training).replace('Q = torch.sigmoid(-z)',"
        " 'Q = torch.sigmoid(z)'), _A.__dict__)",
        "adversarial.lemma19.norm-growth",
    ),
    "the reflected attack objective without its minus sign, +ln(1 + e^{yf})": (
        "adversarial-experiments",
        "import inspect, dropnb.adversarial as _A\n"
        "exec(inspect.getsource(_A._objective).replace('else -torch.nn.functional.softplus(margin)',"
        " 'else torch.nn.functional.softplus(margin)'), _A.__dict__)",
        "adversarial.table61.fgsm-reflection",
    ),
    "the normalised attack step divided by the squared norm": (
        "adversarial-experiments",
        "import inspect, dropnb.adversarial as _A\n"
        "exec(inspect.getsource(_A._ascend).replace('s = g / torch.where(norm > 0, norm, torch.ones_like(norm))',"
        " 's = g / torch.where(norm > 0, norm**2, torch.ones_like(norm))'), _A.__dict__)",
        "adversarial.art.fgsm-l2",
    ),
    "the exact worst margin of a linear model with +ν‖w‖": (
        "adversarial",
        "import inspect, dropnb.adversarial as _A\n"
        "exec(inspect.getsource(_A.linear_worst_margin).replace('return y * (X @ w) - checks',"
        " 'return y * (X @ w) + checks'), _A.__dict__)",
        "adversarial.corollary4.closed-form",
    ),
}


@pytest.fixture(scope="session")
def planted_outcomes(request, tmp_path_factory):
    """The selected planted bugs, each run once from the cell where it first acts (a fork of its
    chapter's one clean run), as many at a time as there are cores (a chapter runs on one thread)."""
    bugs = [item.callspec.params["bug"] for item in request.session.items
            if getattr(item, "originalname", None) == "test_claims_catch_a_planted_bug"]
    outcomes = planted.run([PLANTED_BUGS[bug][:2] for bug in bugs], tmp_path_factory.mktemp("planted"),
                           parallel=os.cpu_count() or 1)
    return dict(zip(bugs, outcomes))


@pytest.mark.parametrize("bug", PLANTED_BUGS)
def test_claims_catch_a_planted_bug(bug, planted_outcomes):
    failing_claim = PLANTED_BUGS[bug][2]
    outcome = planted_outcomes[bug]
    assert outcome.returncode != 0 and "ClaimFailed" in outcome.error, outcome.error
    assert outcome.failed_claims == [failing_claim], outcome.error

def test_a_forked_bug_run_is_the_run_with_the_bug_prepended(tmp_path):
    """The fork that starts a bug mid-chapter records what the chapter run with the bug prepended
    records: the same claims with the same values."""
    chapter, code, failing = PLANTED_BUGS["the exact Rademacher supremum in the plane taken over the arc ends only"]
    forked, = planted.run([(chapter, code)], tmp_path / "forked")
    prepended = run_job(Job(chapter, tmp_path / "prepended", prepend=code))
    assert forked.failed_claims == prepended.failed_claims == [failing], (forked.error, prepended.error)
    assert len(forked.records) > 1
    keys = ("id", "measured", "target", "tolerance", "passed")
    assert [[r[k] for k in keys] for r in forked.records] == [[r[k] for k in keys] for r in prepended.records]
