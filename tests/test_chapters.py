"""Every chapter executes at the quick profile, every claim holds, and the claims can fail.

The records and executed notebooks come from the one quick build of the session (conftest);
the planted bugs run the chapter again from the cell where the bug first acts, up to the first
failing claim (dropnb.book.planted: forks of one clean run per chapter).
"""

import json
import os

import pytest

from dropnb.book.claims import load_records
from dropnb.book import planted
from dropnb.book.layout import claim_ids, pages_with_claims
from dropnb.book.notebooks import Job, run_job

pytestmark = pytest.mark.chapters
REQUIRED_FIELDS = {"id", "chapter", "page", "source", "statement", "measured", "target", "comparison",
                   "tolerance", "passed", "profile", "seed", "seconds"}


def ledger(name):
    return claim_ids(name)


@pytest.fixture(params=pages_with_claims())
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
        "import inspect, dropnb.linear as _T\n"
        "exec(inspect.getsource(_T.expected_gradient_descent).replace(' + 2 * SV @ (cbar * (U.transpose(1, 2) @ U))', ''),"
        " _T.__dict__)",
        "equalization.figure3.gd-step",
    ),
    "a division by the hidden activations in Algorithm 1's Figure 3 runs": (
        "equalization-training",
        "import inspect, dropnb.linear as _T\n"
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
        "import inspect, dropnb.linear as _T\n"
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
        "import copy, dropnb.linear as T\n"
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
        "import torch, dropnb.deep as _deep\n"
        "_metrics = _deep.deep_metrics\n"
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
        "_deep.deep_metrics = _short_metrics",
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
        "landscape-networks-homogeneous-optimality",
        "import numpy as np, dropnb.relu_polar as H\n"
        "def _ends_only(X, G, H=H):\n"
        "    start, _, _ = H.arcs(X)\n"
        "    values = H.polar_curve(X, G, start)\n"
        "    best = int(np.argmax(values))\n"
        "    return H.Polar(float(values[best]), float(start[best]), H.direction(start[best]))\n"
        "H.polar = _ends_only",
        "landscape-networks.theorem19.polar",
    ),
    "the convex reference stopped at its first check and reported as exact": (
        "landscape-networks-homogeneous-optimality",
        "import inspect, dropnb.relu_polar as _P\n"
        "exec(inspect.getsource(_P.sector_reference).replace('if cert.gap <= tol * cert.primal:', 'if True:')"
        ".replace('cert.primal, cert.dual, it', 'cert.primal, cert.primal, it'), _P.__dict__)",
        "landscape-networks.theorem19.witness",
    ),
    "the dual value of the factorization's duality gap with a quarter of the squared norm of Q": (
        "landscape-networks-factorization",
        "import numpy as np, dropnb.factorization as F\n"
        "def _quarter_gap(Y, U, V, decay, kappa=0.0, _gap=F.duality_gap, np=np):\n"
        "    R = Y - U @ np.swapaxes(V, -1, -2)\n"
        "    sigma = np.linalg.svd(R, compute_uv=False)[..., 0]\n"
        "    scale = np.where(np.asarray(kappa) > 0, 1.0, np.minimum(1.0, decay / sigma))\n"
        "    return _gap(Y, U, V, decay, kappa) - 0.25 * np.sum((R * scale[..., None, None]) ** 2, axis=(-2, -1))\n"
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
        "import inspect, dropnb.relu_capacity as _R\n"
        "exec(inspect.getsource(_R.dropout_regularizer).replace('float(lam * np.sum(', 'float(np.sum('), _R.__dict__)",
        "bounds.prop5.enumeration",
    ),
    "the Gaussian ReLU moment without its density term": (
        "bounds-networks",
        "import inspect, dropnb.relu_capacity as _R\n"
        "exec(inspect.getsource(_R.gaussian_relu_moment).replace(' + m * s * norm.pdf(t)', ''), _R.__dict__)",
        "bounds.prop6.shifted-closed-form",
    ),
    "the exact Rademacher supremum in the plane taken over the arc ends only": (
        "bounds-networks",
        "import inspect, dropnb.relu_capacity as _R\n"
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
        "exec(inspect.getsource(_S.dropout_objective).replace('loss + (1 - retain) / retain * reg', 'loss + reg'),"
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
        "import inspect, dropnb.sensing as _T\n"
        "exec(inspect.getsource(_T.completion_sgd).replace('(in_use.to(dtype) / tensor(retain)[:, None])[:, None, :]',"
        " 'in_use.to(dtype)[:, None, :]'), _T.__dict__)",
        "bounds.movielens.engine-objective",
    ),
    "the ReLU networks trained without their dropout masks": (
        "bounds-experiments",
        "import inspect, dropnb.relu_capacity as _T\n"
        "exec(inspect.getsource(_T.relu_dropout_training).replace('hidden * masks * state', 'hidden * state'),"
        " _T.__dict__)",
        "bounds.mnist.coadaptation-falls-with-rate",
    ),
    "the logistic loss of the convergence chapter in natural log whatever its base": (
        "convergence",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.logistic).replace('value = np.logaddexp(0.0, -z) / math.log(base)',"
        " 'value = np.logaddexp(0.0, -z)'), _W.__dict__)",
        "convergence.loss.base2",
    ),
    "Algorithm 4's row step without the 1/√m of the network's gradient": (
        "convergence-training",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.dropout_sgd).replace('s = (eta * _slope_base2(z) * y / root)',"
        " 's = (eta * _slope_base2(z) * y)'), _W.__dict__)",
        "convergence.lemma12.step",
    ),
    "the arc coverage of the margin program without the arcs that wrap around angle 0": (
        "convergence",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.arc_coverage).replace('for shift in (-2 * np.pi, 0.0, 2 * np.pi):',"
        " 'for shift in (0.0,):'), _W.__dict__)",
        "convergence.margin.monte-carlo",
    ),
    "the classifier engine's gradient without the m^{-1/2} of the network": (
        "convergence-experiments",
        "import inspect, dropnb.relu_lazy as _T\n"
        "exec(inspect.getsource(_T.relu_classifier_sgd).replace('residual *= scale / picked.shape[1]',"
        " 'residual *= 1 / picked.shape[1]'), _T.__dict__)",
        "convergence.engine.first-step",
    ),
    "the fixed sub-networks of Figure 5-3 scored without their masks": (
        "convergence-experiments",
        "import inspect, dropnb.relu_lazy as _T\n"
        "exec(inspect.getsource(_T.relu_classifier_sgd).replace('top = (masks[..., None] * A',"
        " 'top = (torch.ones_like(masks[..., None], dtype=dtype) * A'), _T.__dict__)",
        "convergence.figure53.gap-shrinks-with-width",
    ),
    "Algorithm 4's step climbing the loss (the row step added with the wrong sign)": (
        "convergence-training",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.dropout_sgd).replace('W.add_(s[:, :, None] * x[:, None, :])',"
        " 'W.sub_(s[:, :, None] * x[:, None, :])'), _W.__dict__)",
        "convergence.lemma12.step",
    ),
    "Algorithm 4's test-time network evaluated at the initial weights": (
        "convergence-training",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.dropout_sgd).replace('full = theta * (a * pre * active).sum(-1) / root',"
        " 'full = theta * (a * pre1 * active1).sum(-1) / root'), _W.__dict__)",
        "convergence.theorem14.rate-100",
    ),
    "the network under many masks of one input without the top signs": (
        "convergence-training",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.network).replace('return mask.T @ (a * hidden[:, 0]) / math.sqrt(width)',"
        " 'return mask.T @ hidden[:, 0] / math.sqrt(width)'), _W.__dict__)",
        "convergence.lemma11.mean-output",
    ),
    "the finite-width margins without the half circles that wrap around angle 0": (
        "convergence-training",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.circle_tangent_margins).replace('for shift in (-2 * np.pi, 0.0, 2 * np.pi):  # the half circle may wrap around 0',"
        " 'for shift in (0.0,):'), _W.__dict__)",
        "convergence.lemma15.finite-width",
    ),
    "the tail of the largest row norm at the radius instead of its square": (
        "convergence",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.largest_row_tail).replace('chi2.sf(radius**2, dim)', 'chi2.sf(radius, dim)'), _W.__dict__)",
        "convergence.errata.initialization-event",
    ),
    "Algorithm 4's visited network counted at the test-time output": (
        "convergence-training",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.dropout_sgd).replace('tally[\"sub_mistakes\"] += (z <= 0).to(dtype)',"
        " 'tally[\"sub_mistakes\"] += (y * full <= 0).to(dtype)'), _W.__dict__)",
        "convergence.theorem15.subnetworks-worse",
    ),
    "the logistic loss in base 2 whatever its base argument": (
        "convergence",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.logistic).replace('value = np.logaddexp(0.0, -z) / math.log(base)',"
        " 'value = np.logaddexp(0.0, -z) / LN2'), _W.__dict__)",
        "convergence.errata.log-base-zero-one",
    ),
    "the logistic slope in base 2 whatever its base argument": (
        "convergence",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.logistic_slope).replace('value = np.exp(-np.logaddexp(0.0, z)) / math.log(base)',"
        " 'value = np.exp(-np.logaddexp(0.0, z)) / LN2'), _W.__dict__)",
        "convergence.errata.log-base-slope",
    ),
    "the logistic loss in natural log for positive margins": (
        "convergence",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.logistic).replace('value = np.logaddexp(0.0, -z) / math.log(base)',"
        " 'value = np.where(z > 0, np.log1p(np.exp(-np.abs(z))), np.logaddexp(0.0, -z) / math.log(base))'), _W.__dict__)",
        "convergence.errata.log-base-lemma13",
    ),
    "the circle sampler pairing each point with the label of another draw": (
        "convergence-training",
        "import inspect, dropnb.relu_lazy as _W\n"
        "exec(inspect.getsource(_W.circle_sampler).replace('return points[k], signs[k]',"
        " 'return points[k], signs[k.flip(0)]'), _W.__dict__)",
        "convergence.xor.rate",
    ),
    "the visited sub-network of Figure 5-2 scored without its mask": (
        "convergence-experiments",
        "import inspect, dropnb.relu_lazy as _T\n"
        "exec(inspect.getsource(_T.relu_classifier_sgd).replace('sub = torch.bmm(hidden * visited,',"
        " 'sub = torch.bmm(hidden,'), _T.__dict__)",
        "convergence.figure52.visited-below-full",
    ),
    "the visited sub-network of Figure 5-2 scored at dropout rate 0.5 whatever the run's rate": (
        "convergence-experiments",
        "import inspect, dropnb.relu_lazy as _T\n"
        "exec(inspect.getsource(_T.relu_classifier_sgd).replace("
        "'visited = torch.rand((runs, 1, width), generator=evaluation, device=device, dtype=torch.float32).to(dtype) < theta[:, None, None]',"
        " 'visited = torch.rand((runs, 1, width), generator=evaluation, device=device, dtype=torch.float32).to(dtype) < 0.5'), _T.__dict__)",
        "convergence.figure52.gap-grows-with-rate",
    ),
    "the visited sub-network of Figure 5-2 scored with one mask bit for all its units": (
        "convergence-experiments",
        "import inspect, dropnb.relu_lazy as _T\n"
        "exec(inspect.getsource(_T.relu_classifier_sgd).replace('visited = torch.rand((runs, 1, width)',"
        " 'visited = torch.rand((runs, 1, 1)'), _T.__dict__)",
        "convergence.figure52.gap-shrinks-with-width",
    ),
    "the weighted spectral norm of the Rademacher complexity with 1/(pq) in place of 1/√(pq)": (
        "bounds",
        "import inspect, dropnb.sensing as _S\n"
        "exec(inspect.getsource(_S.rademacher_spectral_norms).replace("
        "'weight = 1 / np.sqrt(p)[:, None] / np.sqrt(q)[None, :]', 'weight = 1 / p[:, None] / q[None, :]'), _S.__dict__)",
        "bounds.rademacher.constant-one",
    ),
    "the rate of Foygel et al. with a base-2 logarithm": (
        "bounds",
        "import inspect, dropnb.sensing as _S\n"
        "exec(inspect.getsource(_S.trace_norm_rate).replace('np.log(d1)', 'np.log2(d1)'), _S.__dict__)",
        "bounds.rademacher.constant-exceeded",
    ),
    "the batched completion descent pairs the penalty weights with the runs in reverse order": (
        "bounds",
        "import inspect, dropnb.sensing as _S\n"
        "exec(inspect.getsource(_S.completion_descent).replace('lam = _batched_weights(lam, U.shape[0], U)',"
        " 'lam = _batched_weights(lam, U.shape[0], U).flip(0)'), _S.__dict__)",
        "bounds.theorem11.alpha-rank",
    ),
    "the batched completion descent never updates V": (
        "bounds",
        "import inspect, dropnb.sensing as _S\n"
        "exec(inspect.getsource(_S.completion_descent).replace('V -= lr * col_scale * gV', 'V -= 0 * gV'), _S.__dict__)",
        "bounds.parametrization.fill-in",
    ),
    "the linear class's supremum with S^† in place of S^{†/2}": (
        "bounds-networks",
        "import inspect, dropnb.relu_capacity as _R\n"
        "exec(inspect.getsource(_R.linear_class_sup).replace('/ np.sqrt(values[keep]))', '/ values[keep])'), _R.__dict__)",
        "bounds.theorem13.inclusion",
    ),
    "the data norm ‖X‖_{S†} without its square root": (
        "bounds-networks",
        "import inspect, dropnb.relu_capacity as _R\n"
        "exec(inspect.getsource(_R.mahalanobis_norm).replace('return float(np.sqrt(np.sum(', 'return float((np.sum('),"
        " _R.__dict__)",
        "bounds.theorem13.lower-bound",
    ),
    "the data norm ‖X‖_{S†} as a root mean instead of a root sum": (
        "bounds-networks",
        "import inspect, dropnb.relu_capacity as _R\n"
        "exec(inspect.getsource(_R.mahalanobis_norm).replace('np.sqrt(np.sum(', 'np.sqrt(np.mean('), _R.__dict__)",
        "bounds.theorem12.upper-bound",
    ),
    "the Rademacher complexity of a finite class with the absolute value of the sum": (
        "bounds-networks",
        "import inspect, dropnb.relu_capacity as _R\n"
        "exec(inspect.getsource(_R.finite_class_rademacher).replace('np.max(signs @ G.T, axis=1)',"
        " 'np.max(np.abs(signs @ G.T), axis=1)'), _R.__dict__)",
        "bounds.networks-errata.lemma10-constant",
    ),
    "completion SGD updates U only": (
        "bounds-experiments",
        "import inspect, dropnb.sensing as _T\n"
        "exec(inspect.getsource(_T.completion_sgd).replace("
        "'V_used.scatter_add_(0, c[:, None].expand(-1, used), (step_error * (b * u)).view(-1, used))', 'None'),"
        " _T.__dict__)",
        "bounds.movielens.beats-biases",
    ),
    "completion SGD starts every run from the first run's factors": (
        "bounds-experiments",
        "import inspect, dropnb.sensing as _T\n"
        "exec(inspect.getsource(_T.completion_sgd).replace('U, V = tensor(U0).clone(), tensor(V0).clone()',"
        " 'U, V = tensor(U0[:1]).repeat(runs, 1, 1), tensor(V0[:1]).repeat(runs, 1, 1)'), _T.__dict__)",
        "bounds.movielens.start-scale",
    ),
    "the one-sided confidence bound on a mean with the standard deviation for the standard error": (
        "bounds-experiments",
        "import inspect, dropnb.stats as _St\n"
        "exec(inspect.getsource(_St.mean_confidence_bound).replace('v.std(ddof=1) / np.sqrt(v.size)', 'v.std(ddof=1)'),"
        " _St.__dict__)",
        "bounds.movielens.early-stopping-margin",
    ),
    "symmetrization with one sign per input coordinate instead of one per example": (
        "bounds-experiments",
        "import inspect, dropnb.relu_capacity as _R\n"
        "exec(inspect.getsource(_R.symmetrized).replace('size=X.shape[1])', 'size=(X.shape[0], 1))'), _R.__dict__)",
        "bounds.mnist.symmetrized-gap-falls-less",
    ),
    'Algorithm 5 descending the reflected loss instead of ascending it': (
        'adversarial',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A._pgd).replace('factor = -torch.sigmoid(z) if', 'factor = torch.sigmoid(z) if'), _A.__dict__)",
        'adversarial.reflection.raw-step',
    ),
    "the β-certificate's Lipschitz constant from W instead of W/‖W‖_F": (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.beta_certificate).replace('lipschitz = float(np.abs(a) @ np.linalg.norm(W, axis=1)) / norm', 'lipschitz = float(np.abs(a) @ np.linalg.norm(W, axis=1))'), _A.__dict__)",
        'adversarial.theorem16.beta-robust',
    ),
    'the grid search keeps only the cubes inside the ball, not those that meet it': (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.grid_readings).replace('near = np.where(low > 0, low, np.where(high < 0, -high, 0.0))', 'near = np.maximum(np.abs(low), np.abs(high))'), _A.__dict__)",
        'adversarial.grid.flip-count',
    ),
    'the reflected loss as −ℓ(z) instead of −ℓ(−z)': (
        'adversarial',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.reflected_logistic).replace('value = -np.asarray(logistic(-z, base=math.e))', 'value = -np.asarray(logistic(z, base=math.e))'), _A.__dict__)",
        'adversarial.loss.slope-square',
    ),
    'the logistic slope in base 2 whatever base is asked': (
        'adversarial',
        'import inspect, dropnb.relu_lazy as _W\n'
        "exec(inspect.getsource(_W.logistic_slope).replace('value = np.exp(-np.logaddexp(0.0, z)) / math.log(base)', 'value = np.exp(-np.logaddexp(0.0, z)) / math.log(2.0)'), _W.__dict__)",
        'adversarial.loss.slope-times-margin',
    ),
    'the exact worst case in the plane without the steepest point of each cone': (
        'adversarial',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.worst_margin_plane).replace('candidates.append(x - radius * g / np.linalg.norm(g))', 'pass'), _A.__dict__)",
        'adversarial.lemma18.exact-worst-case',
    ),
    'Algorithm 5 returning the iterate of largest margin': (
        'adversarial',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A._pgd).replace('torch.full(y.shape, math.inf,', 'torch.full(y.shape, -math.inf,').replace('better = (z < best_margin)', 'better = (z > best_margin)'), _A.__dict__)",
        'adversarial.lemma18.bound',
    ),
    'Algorithm 5 projecting only beyond twice the radius': (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A._pgd).replace('moved = torch.where(length > radius, moved * (radius /', 'moved = torch.where(length > 2 * radius, moved * (2 * radius /'), _A.__dict__)",
        'adversarial.lemma19.in-ball',
    ),
    "Algorithm 6's step averaged over the m units": (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.adversarial_training).replace('update = (eta * Q * y)[:, None, None]', 'update = (eta * Q * y / width)[:, None, None]'), _A.__dict__)",
        'adversarial.lemma19.increment',
    ),
    "Algorithm 6's step with a flat top layer κ·sign(a_r) in place of a_r": (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.adversarial_training).replace('* (a * slope)[:, :, None] * delta[:, None, :]', '* (kappa[:, None] * torch.sign(a) * slope)[:, :, None] * delta[:, None, :]'), _A.__dict__)",
        'adversarial.errata.lemma19-increment',
    ),
    'multi-class PGD descending the cross-entropy': (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.multiclass_pgd).replace('g = -(W[y] - p @ W)', 'g = W[y] - p @ W'), _A.__dict__)",
        'adversarial.greedy.cross-entropy-succeeds',
    ),
    'the greedy attack ascending the cross-entropy': (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        'exec(inspect.getsource(_A.multiclass_pgd).replace(\'if loss == "cross-entropy":\', \'if loss in ("cross-entropy", "greedy"):\'), _A.__dict__)',
        'adversarial.greedy.greedy-fails',
    ),
    'the reflected attack objective without its minus sign, +ln(1 + e^{yf})': (
        'adversarial-experiments',
        'import inspect, dropnb.classifiers as _C\n'
        "exec(inspect.getsource(_C._objective).replace('else -torch.nn.functional.softplus(margin)', 'else torch.nn.functional.softplus(margin)'), _C.__dict__)",
        'adversarial.table61.reflected-l2-stronger',
    ),
    "the image attacks' steps not clipped to the pixel range": (
        'adversarial-experiments',
        'import inspect, dropnb.classifiers as _C\n'
        "exec(inspect.getsource(_C._ascend).replace('moved = moved.clamp(*clip)', 'moved = moved'), _C.__dict__)",
        'adversarial.art.fgsm-linf',
    ),
    "the image attacks stepping along the previous iterate's gradient": (
        'adversarial-experiments',
        'import inspect, dropnb.classifiers as _C\n'
        "exec(inspect.getsource(_C._ascend).replace('        (g,) = torch.autograd.grad(objective, delta)\\n', '        (g,) = torch.autograd.grad(objective, delta)\\n        g, stale = (stale if t else g), g\\n'), _C.__dict__)",
        'adversarial.art.bim-linf',
    ),
    'the reflected loss without its minus sign, ln(1 + e^z)': (
        'adversarial',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.reflected_logistic).replace('value = -np.asarray(logistic(-z, base=math.e))', 'value = np.logaddexp(0.0, z)'), _A.__dict__)",
        'adversarial.loss.concave',
    ),
    "Algorithm 6's outer step with the reflected loss's slope σ(z) instead of −ℓ'(z) = σ(−z)": (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.adversarial_training).replace('Q = torch.sigmoid(-z)', 'Q = torch.sigmoid(z)'), _A.__dict__)",
        'adversarial.lemma19.norm-growth',
    ),
    'the normalised attack step divided by the squared norm': (
        'adversarial-experiments',
        'import inspect, dropnb.classifiers as _C\n'
        "exec(inspect.getsource(_C._ascend).replace('s = g / torch.where(norm > 0, norm, torch.ones_like(norm))', 's = g / torch.where(norm > 0, norm**2, torch.ones_like(norm))'), _C.__dict__)",
        'adversarial.art.fgsm-l2',
    ),
    'the exact worst margin of a linear model with +ν‖w‖': (
        'adversarial-training',
        'import inspect, dropnb.adversarial as _A\n'
        "exec(inspect.getsource(_A.linear_worst_margin).replace('return y * (X @ w) - checks', 'return y * (X @ w) + checks'), _A.__dict__)",
        'adversarial.corollary4.closed-form',
    ),
}

PLANTED_BUGS["the split of a unit into k copies scaled by 1/k instead of 1/√k"] = (
    "landscape-networks-exercises",
    "import inspect, dropnb.factorization as _F\n"
    "exec(inspect.getsource(_F.split_units).replace('/ np.sqrt(k), np.repeat(V, k, axis=-1) / np.sqrt(k)',"
    " '/ k, np.repeat(V, k, axis=-1) / k'), _F.__dict__)",
    "landscape-networks.exercises.split-three",
)
# The exercise pages are broken by bugs of their chapter: the claim that must fail first is an
# exercise's (each solution is checked by the package the chapter verifies).
EXERCISE_BUGS = {
    "θ in place of 1/θ in the thinned network": "regularizer.exercises.binary-inputs.penalty",
    "the printed thresholds 1 + λj of Algorithm 3": "equalization.exercises.flat-spectrum",
    "λA in place of λ Diag(A) in the moment propagation": "deep-linear.exercises.single-output",
    "the printed rule ρ* = argmax of (11) in the s-support norm": "structured.exercises.spike",
    "the factor 2 of 2U Diag(uᵢᵀdᵢ) missing in the tied Hessian": "landscape-dropout.exercises.toy-spectrum",
    "the weighted spectral norm of the Rademacher complexity with 1/(pq) in place of 1/√(pq)":
        "bounds.exercises.distinct-entries",
    "Algorithm 4's row step without the 1/√m of the network's gradient": "convergence.exercises.worst-step",
    "the logistic slope in base 2 whatever base is asked": "adversarial.exercises.lambert-peak",
}
PLANTED_BUGS |= {f"{bug}, on the exercises": (claim.split(".")[0] + "-exercises", PLANTED_BUGS[bug][1], claim)
                 for bug, claim in EXERCISE_BUGS.items()}


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
