"""The vector leaves brought to the short form (DiagonalGaussian, MultivariateGaussian,
MultivariateStudentT; Gaussian and Multinomial trimmed) fit and score bit for bit as before: every
fitted parameter (as ``float.hex``) and every score array of hard data, hashed, against digests
pinned with main at e5493bf (the tree before the move; ``python
tests/families/test_vector_leaf_pinned_fits.py`` prints them). The cases cover diagonal,
spherical, full and tied mixtures in float64, float32 and double-double, the multivariate t,
missing entries, priors, and records with vector fields; both the small-data stacked path and the
fused linear E-step (a mixture over more rows) run."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import mixfold
from mixfold import (DiagonalGaussianDistribution, DiagonalGaussianEstimator,
                     GaussianDistribution, GaussianEstimator, MixtureEstimator,
                     MultivariateGaussianDistribution, MultivariateGaussianEstimator,
                     MultivariateStudentTDistribution, MultivariateStudentTEstimator,
                     RecordEstimator)
from mixfold.precision import resolve_precision
from tests.families.pinned import all_digests, digest_model, digest_scores

PINNED = {  # computed with main at e5493bf; the entries with a number were re-pinned when the full
    # covariance's float64 scores and sums of chunks from 8192 rows became compiled passes
    # (compute/numba_gaussian.py), then those of small data too: the largest relative difference
    # of any fitted parameter (of a score array) old vs new, round-off that the fit's iterations
    # amplify (sums about a centre shared by far means); "fused": re-pinned when one compiled
    # pass scored, normalised (its own vectorised exp) and summed (64 partial sums) a chunk
    # (families/_full_gaussian_fold.py), measured against 836e1ef; "factor": re-pinned when
    # covariances up to D = 32 were factored by one compiled call (families/_covariance.py:
    # L by its columns, U by forward substitution, not LAPACK's blocked kernels), against
    # 459749a: the largest relative difference of a fitted parameter (of a score array)
    "diagonal: float64": "c8794b22354adf6e",
    "diagonal: float32": "c8794b22354adf6e",
    "diagonal: dd": "a9a3eae56853a7d5",
    "diagonal: large": "a544fe988b794b6b",
    "diagonal: large float32": "a544fe988b794b6b",
    # the compiled small-data E-step (smalldata5): against e5493bf's 1c1ba8d71512923e, means
    # and variances within 8.1e-12 of their largest, weights 5.6e-17
    "diagonal: spherical": "18166c0e1ba52138",
    # ... against 25ed73d957946690, means and variances within 2.2e-19 of their largest
    "diagonal: tied": "f5c84c3a89a40a2b",
    "diagonal: prior, relative": "cbc1431cd50ed446",
    "diagonal: missing": "c61f8d0813b77e7e",
    "diagonal: single": "61da265a04de846d",
    "full: float64": "47c6b2499855808b",  # small data compiled too: 7.6e-13; fused: 2.0e-11
    "full: float32": "b4f3063eadf492b3",  # 7.3e-13; fused: 4.3e-11
    "full: dd": "b94d7b41d772490a",
    "full: large": "74c665e9dd68dffe",  # 1.6e-10; fused: 6.9e-11
    "full: large float32": "7096cec90d1649e9",  # 1.6e-10; fused: 6.7e-11
    # the tied small-data fold pools the scatter before the posteriors (against 4a49e706617146a8:
    # weights and means within 3e-16 of their largest, the covariance 1.1e-10 after 25
    # iterations: two means 1e3 apart in unit spreads, whose within-scatter either way is the
    # difference of sums ~1e5 times larger)
    "full: tied": "0135c776fd4bd970",
    # the tied M-step pools before its one division, and the fused pass's normalisation: against
    # 836e1ef (815097d7f93075ee), the covariance within 1.1e-10 of its largest, means 1.3e-15,
    # weights the same
    "full: tied large": "661438f18e67b19c",
    "full: prior, relative": "a3f0470a7c9aa78f",  # 1.3e-13; fused: 1.1e-11
    "full: missing": "16f2608a3060d653",  # factor: 3.4e-14
    "full: single": "90158bcdc82cb5b4",
    "student_t: single": "7657c127637778ad",  # factor: 5.7e-17
    "student_t: mixture": "cb79374ccb0f4c03",  # factor: 3.4e-16
    "student_t: fixed nu, relative": "b94da04c7f8c2d34",  # factor: 5.9e-16
    "student_t: missing": "5ad1721fca3380b0",  # factor: 3.5e-15
    "record: vector fields": "795e430a26282bbf",  # 1.6e-17; factor: 5.5e-12
    "record: vector fields float32": "db779395726ffd2d",
    "gaussian: mixture": "130bd27d0930fb16",
    "diagonal scores: float64 one": "0763d0652451f4df",
    "diagonal scores: float64 stacked": "f5df46ff5a02dc0b",
    "diagonal scores: float32 one": "ecc77b59c97f356e",
    "diagonal scores: float32 stacked": "f4a792bcf1fe66f5",
    "diagonal scores: bfloat16@emulated one": "1c794c8b73e9fa91",
    "diagonal scores: relative": "f3677a4b38f01f0e",
    "full scores: float64 one": "01a9a564e5afdb99",  # factor: 2.7e-16
    "full scores: float64 stacked": "b8c11223021b8bbf",  # 5.4e-16; factor: 2.7e-16
    "full scores: float32 one": "fabaf5e112a839bb",
    "full scores: float32 stacked": "a49b0e084dc368ba",
    "full scores: bfloat16@emulated one": "5f39a61232747767",
    "full scores: relative": "fce166be4f609b71",  # factor: 4.1e-16
    "tied scores: float64 one": "5b7bedc9b94da1c7",  # factor: 2.7e-16
    "tied scores: float64 stacked": "1e0fde24b67f4d94",  # 5.4e-16; factor: 2.7e-16
    "tied scores: float32 one": "9ef1994e6591c67f",
    "tied scores: float32 stacked": "40989960e490b7cf",
    "tied scores: bfloat16@emulated one": "d6d52f9f07713337",
    "tied scores: relative": "f63dbfbb05b71e16",  # factor: 5.4e-16
    "student_t scores: float64 one": "d69154db914cdcfb",  # factor: 3.2e-16
    "student_t scores: float32 one": "d69154db914cdcfb",  # factor: as float64 one
    "student_t scores: bfloat16@emulated one": "d69154db914cdcfb",  # factor: as float64 one
    "gaussian scores: float64 one": "8faf6d0893cfd640",
    "gaussian scores: float64 stacked": "ebdad50870cd0b7a",
    "gaussian scores: float32 one": "354f3c07b47142c9",
    "gaussian scores: float32 stacked": "d5f26c1a12663360",
    "gaussian scores: bfloat16@emulated one": "22a107c4f408b32d",
    "gaussian scores: relative": "ebdad50870cd0b7a",
}


def _fit(x, est, max_iter=25, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a collapsed variance is floored on purpose)
        return mixfold.optimize(x, est, progress=False, max_iter=max_iter, seed=3, **kw)


def _data():
    rng = np.random.default_rng(5)
    d = 4
    means = np.array([[0.0, 0.0, 0.0, 0.0], [4.0, -3.0, 1e3, 2.0], [-5.0, 5.0, 1e3, -1.0]])
    a = rng.normal(size=(3, d, d))
    covs = np.einsum("kij,klj->kil", a, a) + 0.3 * np.eye(d)
    small = np.concatenate([rng.multivariate_normal(m, c, size=700) for m, c in
                            zip(means, covs)])
    rng.shuffle(small)
    large = np.concatenate([rng.multivariate_normal(m, c, size=9000) for m, c in
                            zip(means, covs)])
    rng.shuffle(large)
    heavy = MultivariateStudentTDistribution([1.0, -2.0, 0.5], [[1.0, 0.6, 0.0], [0.6, 2.0, 0.3],
                                                                [0.0, 0.3, 0.5]], 3.0)
    t_rows = np.concatenate([heavy.sampler(1).sample(1500),
                             heavy.sampler(2).sample(1000) + 6.0])
    gaps = small.copy()
    gaps[rng.random(gaps.shape) < 0.1] = np.nan
    gaps[np.all(np.isnan(gaps), axis=1), 0] = 0.0
    records = [{"v": list(small[i, :2]), "w": list(small[i, 1:]), "g": float(small[i, 3])}
               for i in range(len(small))]
    return dict(small=small, large=large, t_rows=t_rows, gaps=gaps, records=records,
                means=means, covs=covs)


def _mix(est, k=3):
    return MixtureEstimator([est] * k)


def _fits(d):
    """(family, case) -> fitted model."""
    diag, full = DiagonalGaussianEstimator, MultivariateGaussianEstimator
    record = RecordEstimator({"v": diag(), "w": full(), "g": GaussianEstimator()})
    prior = dict(mean_weight=2.0, covariance_prior=0.5, covariance_weight=3.0)
    return {
        ("diagonal", "float64"): lambda: _fit(d["small"], _mix(diag())),
        ("diagonal", "float32"): lambda: _fit(d["small"], _mix(diag()), precision="float32"),
        ("diagonal", "dd"): lambda: _fit(d["small"], _mix(diag()), precision="dd", max_iter=6),
        ("diagonal", "large"): lambda: _fit(d["large"], _mix(diag()), max_iter=8),
        ("diagonal", "large float32"): lambda: _fit(d["large"], _mix(diag()), max_iter=8,
                                                    precision="float32"),
        ("diagonal", "spherical"): lambda: _fit(d["small"], _mix(diag(spherical=True))),
        ("diagonal", "tied"): lambda: _fit(d["small"], _mix(diag(covariance_keys="c"))),
        ("diagonal", "prior, relative"): lambda: _fit(d["small"], _mix(diag(
            reg_covar_mode="relative", **prior))),
        ("diagonal", "missing"): lambda: _fit(d["gaps"], _mix(diag(missing=True))),
        ("diagonal", "single"): lambda: _fit(d["small"], diag(), max_iter=2),
        ("full", "float64"): lambda: _fit(d["small"], _mix(full())),
        ("full", "float32"): lambda: _fit(d["small"], _mix(full()), precision="float32"),
        ("full", "dd"): lambda: _fit(d["small"], _mix(full()), precision="dd", max_iter=6),
        ("full", "large"): lambda: _fit(d["large"], _mix(full()), max_iter=8),
        ("full", "large float32"): lambda: _fit(d["large"], _mix(full()), max_iter=8,
                                                precision="float32"),
        ("full", "tied"): lambda: _fit(d["small"], _mix(full(covariance_keys="c"))),
        ("full", "tied large"): lambda: _fit(d["large"], _mix(full(covariance_keys="c")),
                                             max_iter=8),
        ("full", "prior, relative"): lambda: _fit(d["small"], _mix(full(
            reg_covar_mode="relative", **prior))),
        ("full", "missing"): lambda: _fit(d["gaps"], _mix(full(missing=True)), max_iter=10),
        ("full", "single"): lambda: _fit(d["small"], full(), max_iter=2),
        ("student_t", "single"): lambda: _fit(d["t_rows"][:1500], MultivariateStudentTEstimator(),
                                              max_iter=40),
        ("student_t", "mixture"): lambda: _fit(d["t_rows"], _mix(MultivariateStudentTEstimator(),
                                                                 2), max_iter=30),
        ("student_t", "fixed nu, relative"): lambda: _fit(d["t_rows"], _mix(
            MultivariateStudentTEstimator(nu=4.0, reg_covar_mode="relative"), 2)),
        ("student_t", "missing"): lambda: _fit(d["gaps"][:, :3], _mix(
            MultivariateStudentTEstimator(missing=True), 2), max_iter=10),
        ("record", "vector fields"): lambda: _fit(d["records"], _mix(record)),
        ("record", "vector fields float32"): lambda: _fit(d["records"], _mix(record),
                                                          precision="float32"),
        ("gaussian", "mixture"): lambda: _fit(d["small"][:, 2], _mix(GaussianEstimator())),
    }


def _scored(d):
    """family -> (components, raw rows) scored one by one and stacked."""
    means, covs, rows = d["means"], d["covs"], d["small"][::3]
    return {
        "diagonal": ([DiagonalGaussianDistribution(m, np.diagonal(c)) for m, c in
                      zip(means, covs)], rows),
        "full": ([MultivariateGaussianDistribution(m, c) for m, c in zip(means, covs)], rows),
        "tied": (MultivariateGaussianDistribution.tied(means, covs[0]), rows),
        "student_t": ([MultivariateStudentTDistribution(m, c, nu) for m, c, nu in
                       zip(means, covs, (2.5, 7.0, 30.0))], rows),
        "gaussian": ([GaussianDistribution(m, c) for m, c in zip(means[:, 2], covs[:, 2, 2])],
                     rows[:, 2]),
    }


def _score_digests(comps, rows) -> dict[str, str]:
    enc = comps[0].encoder().encode(rows)
    out = {}
    for name in ("float64", "float32", "bfloat16@emulated"):
        precision = resolve_precision(name)
        out[f"{name} one"] = digest_scores(np.stack([c.seq_log_density(enc, precision)
                                                           for c in comps]))
        if hasattr(type(comps[0]), "stack_log_density") and precision.native:
            out[f"{name} stacked"] = digest_scores(
                type(comps[0]).stack_log_density(comps, enc, precision))
    if hasattr(type(comps[0]), "stack_relative_log_density"):
        out["relative"] = digest_scores(type(comps[0]).stack_relative_log_density(comps, enc))
    return out


FITS = list(_fits(_data()))
SCORES = list(_scored(_data()))


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.mark.parametrize("family, case", FITS, ids=[f"{f}-{c}" for f, c in FITS])
def test_fit_is_bit_identical_to_before_the_short_form(data, family, case):
    model = _fits(data)[family, case]()
    assert digest_model(model) == PINNED[f"{family}: {case}"]


@pytest.mark.parametrize("family", SCORES)
def test_scores_are_bit_identical_to_before_the_short_form(data, family):
    comps, rows = _scored(data)[family]
    digests = _score_digests(comps, rows)
    assert digests == {k: PINNED[f"{family} scores: {k}"] for k in digests}


if __name__ == "__main__":
    print(json.dumps(all_digests(_fits(_data()), _scored(_data()), _score_digests), indent=4))
