"""Checks every family of [families-2] passes: model file round trip, payload halves, weights as
repeated rows, a log-likelihood that never decreases, a mixture that runs."""

import json
import warnings

import numpy as np

import mixfold
from mixfold import MixtureEstimator
from mixfold.decomposition import Decomposition, decomposition_for


def check_model_file(dist, tmp_path):
    """save/load gives the same model; a document with an extra field is refused."""
    path = mixfold.save(dist, tmp_path / "m.json")
    assert mixfold.load(path) == dist
    doc = json.loads(path.read_text())
    doc["model"]["bogus"] = 1.0
    path.write_text(json.dumps(doc))
    try:
        mixfold.load(path)
    except mixfold.ModelFileError as err:
        assert "bogus" in str(err)
    else:
        raise AssertionError("a model file with an unknown field loaded")


def check_payload_halves(estimator, rows, model, rng):
    """Two halves folded apart and combined equal the whole; the flat payload round trips."""
    encoder = estimator.encoder().fit(rows)
    enc = encoder.encode(rows)
    est = estimator.bind(encoder)
    n = enc.n_rows
    w = rng.uniform(0, 2, size=n)
    make = est.accumulator_factory().make
    whole, first, second = make(), make(), make()
    half = n // 2
    whole.seq_update(enc, w, model)
    first.seq_update(enc.rows(0, half), w[:half], model)
    second.seq_update(enc.rows(half, n), w[half:], model)
    np.testing.assert_allclose(first.combine(second).to_array(), whole.to_array(), rtol=1e-11,
                               atol=1e-9)
    copy = make().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())
    return est.estimate(float(w.sum()), whole.value())


def check_weights_are_repeats(make_estimator, rows, rng, **fit_options):
    """Integer weights fit as repeated rows."""
    w = rng.integers(0, 4, size=len(rows))
    repeated = [r for r, k in zip(rows, w) for _ in range(k)]
    if isinstance(rows, np.ndarray):
        repeated = np.repeat(rows, w, axis=0)
    a = mixfold.optimize(rows, make_estimator(), weights=w, progress=False, **fit_options)
    b = mixfold.optimize(repeated, make_estimator(), progress=False, **fit_options)
    for key, value in a.to_dict().items():
        if isinstance(value, (str, dict)) or np.asarray(value).dtype.kind not in "fiu":
            assert value == b.to_dict()[key], key
        else:
            np.testing.assert_allclose(value, b.to_dict()[key], rtol=1e-8, atol=1e-12)


def check_monotone_mixture(make_estimator, rows, k=2, iters=30):
    """A K-component mixture fits, its log-likelihood never decreases, its model is finite."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mixfold.DegenerateFitWarning)
        res = mixfold.fit(rows, MixtureEstimator([make_estimator() for _ in range(k)]),
                          max_iter=iters, tol=0.0, seed=3, progress=False)
    ll = np.asarray(res.log_likelihood)
    assert np.isfinite(ll).all()
    assert (np.diff(ll) >= -1e-9 * np.abs(ll[1:])).all(), ll
    return res


def check_decomposition(dist):
    dc = decomposition_for(dist)
    assert isinstance(dc, Decomposition)
    assert dc.param_bytes > 0
    return dc


def check_mixture_step(estimator, components, rows, ref_logpdf, rng, fused=True):
    """One mixture E-step (the fused linear fold when ``fused``) equals the responsibilities
    of the reference log-densities ``ref_logpdf(component, rows)`` added up by each
    component's own accumulator; the returned log-densities equal the reference mixture's."""
    from scipy.special import logsumexp

    from mixfold.compute.band_engines import fused_linear_mixture

    weights = rng.dirichlet(np.ones(len(components)))
    model = mixfold.MixtureDistribution(components, weights)
    encoder = estimator.encoder().fit(rows)
    enc = encoder.encode(rows)
    bound = estimator.bind(encoder)
    mix = MixtureEstimator([bound] * len(components))
    acc = mix.accumulator_factory().make()
    assert (acc.units.fused_pass is fused_linear_mixture) == fused
    w = rng.uniform(0.5, 2.0, size=enc.n_rows)
    got = acc.seq_update(enc, w, model)
    scores = np.stack([ref_logpdf(c, rows) for c in components], axis=1) + np.log(weights)
    lse = logsumexp(scores, axis=1)
    if got is not None:
        np.testing.assert_allclose(got, lse, rtol=1e-9, atol=1e-9)
    resp = np.exp(scores - lse[:, None]) * w[:, None]
    for k, comp_acc in enumerate(acc.components):
        ref = bound.accumulator_factory().make()
        ref.seq_update(enc, resp[:, k], components[k])
        np.testing.assert_allclose(comp_acc.to_array(), ref.to_array(), rtol=1e-8, atol=1e-8)
