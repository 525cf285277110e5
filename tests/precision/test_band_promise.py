"""Every band keeps its promise on data that is hard for it (mixfold.examples.band_battery):
whole fits against float64 from the same start, judged on the log-likelihood and the model the
user gets; mixed plans (dd included); the calibrated planner; the drift guard."""

import warnings

import numpy as np
import pytest

import mixfold
from mixfold.compute import linear_screened
from mixfold.compute.accuracy import step_error
from mixfold.compute.screened import Screen
from mixfold.examples.band_battery import REPORTED_DISTANCE, check_band
from mixfold.parallel.heterogeneous import Worker, plan_heterogeneous
from mixfold.parallel.resources import DeviceSpec, Resources
from mixfold.precision import FIT_DISTANCE, UNIT_ROUNDOFF

#: a fall of the true log-likelihood this small (relative) is float32's round-off
ROUND_OFF = 16 * UNIT_ROUNDOFF["float32"]


def _assert_kept(row: dict) -> None:
    assert row["fit_distance"] <= row["promise"], row
    assert row["density_distance"] <= row["density_promise"], row
    assert row["largest_fall"] <= ROUND_OFF, row
    assert row["reported_distance"] <= REPORTED_DISTANCE, row
    assert row["promotions"] == [], row


@pytest.mark.parametrize("band", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("name", ["separated", "overlapping", "far", "full", "records"])
def test_a_fit_in_the_band_keeps_its_promise(name, band):
    _assert_kept(check_band(name, band, n_rows=6000, max_iter=6))


@pytest.mark.slow
@pytest.mark.parametrize("band", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("name", ["separated", "far", "wide", "many"])
def test_a_long_fit_in_the_band_keeps_its_promise(name, band):
    _assert_kept(check_band(name, band, n_rows=60_000, max_iter=20))


def test_a_model_the_band_cannot_hold_is_rescored_everywhere():
    """Variances of 1e-6 give coefficients of 5e5, beyond float16's range: the band's scores
    bound nothing, every component is rescored, and the fit keeps the promise."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1e-3, 3000), rng.normal(0.01, 2e-3, 3000)])
    est = mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 2)
    ref = mixfold.optimize(x, est, seed=0, tol=0, max_iter=8, progress=False)
    model = ref.fit_result.model
    enc = ref.encoder().encode(x)
    accs = [c.estimator().accumulator_factory().make() for c in model.components]
    terms = type(accs[0]).linear_terms(accs, model.components, enc)
    assert Screen.plan([terms], model.log_weights, 0.0, "float16").eta == np.inf
    assert Screen.plan([terms], model.log_weights, 0.0, "bfloat16").eta < 1
    fit = mixfold.optimize(x, est, seed=0, tol=0, max_iter=8, precision="float16",
                           progress=False)
    want = ref.seq_log_density(enc).mean()
    assert abs(fit.seq_log_density(enc).mean() - want) <= FIT_DISTANCE["float16"] * abs(want)
    assert fit.fit_result.promotions == []


# -- mixed plans --------------------------------------------------------------------------------


def _two_gaussians(n: int = 20_000):
    truth = mixfold.MixtureDistribution([mixfold.GaussianDistribution(-2, 1),
                                         mixfold.GaussianDistribution(3, 2)], [0.4, 0.6])
    return truth.sampler(0).sample(n), mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 2)


@pytest.mark.parametrize("bands", [("float32", "dd"), ("float64", "dd"), ("bfloat16", "dd"),
                                   ("bfloat16", "float64"), ("float16", "float32")])
def test_a_mixed_plan_climbs_and_ends_within_its_worst_bands_promise(bands):
    x, est = _two_gaussians()
    ref = mixfold.optimize(x, est, tol=0, max_iter=40, progress=False)
    pool = [Worker("fast", precisions=(bands[0],), base_throughput=2.0),
            Worker("exact", precisions=(bands[1],))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no decrease, no promotion
        fit = mixfold.optimize(x, est, resources=pool, precision="auto", tol=0, max_iter=40,
                               progress=False)
    result = fit.fit_result
    assert result.stop_reason in ("max_iter", "converged")  # (tol=0: a step that moves nothing)
    assert result.promotions == []
    assert [a.rows > 0 for a in result.plan.assignments] == [True, True]
    lls = np.array(result.log_likelihood)
    assert (np.diff(lls) >= -ROUND_OFF * np.abs(lls[1:])).all()
    enc = ref.encoder().encode(x)
    want = ref.seq_log_density(enc).mean()
    worst = max(FIT_DISTANCE[b] for b in bands)
    assert abs(fit.seq_log_density(enc).mean() - want) <= worst * abs(want)


# -- the calibrated planner ---------------------------------------------------------------------


def test_calibration_measures_each_bands_error_on_the_users_data_and_model():
    x, _ = _two_gaussians(8000)
    model = mixfold.MixtureDistribution([mixfold.GaussianDistribution(-1.5, 1.2),
                                         mixfold.GaussianDistribution(2.5, 1.8)], [0.5, 0.5])
    resources = Resources((DeviceSpec("cpu", precisions=("bfloat16", "float32", "float64",
                                                         "dd")),))
    device = resources.calibrate(model, x, min_seconds=0.01).devices[0]
    assert set(device.band_error) == set(device.band_throughput)
    assert device.band_error["float64"] == 0.0 and device.band_error["dd"] < 1e-14
    enc = model.encoder().encode(x)
    for band in ("bfloat16", "float32"):  # the measure of one EM step against float64
        assert device.band_error[band] == pytest.approx(step_error(model, enc, band).error)
        assert device.band_error[band] < 1e-5
    assert DeviceSpec.from_dict(device.to_dict()) == device


def test_a_band_whose_measured_error_fails_the_budget_is_never_planned():
    fast = Worker("fast", precisions=("bfloat16", "float32"),
                  band_throughput={"bfloat16": 10.0, "float32": 5.0},
                  band_error={"bfloat16": 3e-4, "float32": 2e-8})
    only_bf16 = Worker("coarse", precisions=("bfloat16",), band_throughput={"bfloat16": 10.0},
                       band_error={"bfloat16": 3e-4})
    plan = plan_heterogeneous([fast, only_bf16], 1000, target_rel_error=1e-6)
    got = [(a.precision, a.rows, a.measured_error) for a in plan.assignments]
    assert got == [("float32", 1000, 2e-8), ("bfloat16", 0, 3e-4)]
    # the measured error decides, not the a-priori model (which would refuse float32 here)
    assert plan_heterogeneous([fast], 10, target_rel_error=1e-3).assignments[0].precision == \
        "bfloat16"
    with pytest.raises(ValueError, match=r"^target_rel_error=1e-09 cannot be met: the most "
                                         r"accurate band these workers run, float32 on 'fast', "
                                         r"has an error of 2e-08$"):
        plan_heterogeneous([fast, only_bf16], 1000, target_rel_error=1e-9)


def test_a_fit_with_an_impossible_budget_is_refused_in_one_line():
    x, est = _two_gaussians(2000)
    pool = [Worker("a", precisions=("float32",), band_error={"float32": 1e-7})]
    with pytest.raises(ValueError, match="target_rel_error=1e-10 cannot be met"):
        mixfold.optimize(x, est, resources=pool, precision="auto", target_rel_error=1e-10,
                         progress=False)


# -- the drift guard ----------------------------------------------------------------------------


def _inaccurate_engine(monkeypatch):
    """A deliberately wrong bfloat16 engine: its quadratic sums 30% too large."""
    fold = linear_screened.ScreenedEStep.fold_block

    def wrong(self, lo, hi):
        sums, counts = fold(self, lo, hi)
        if self.band == "bfloat16":
            sums = sums.copy()
            sums[:, :self.f // 2] *= 1.3
        return sums, counts

    monkeypatch.setattr(linear_screened.ScreenedEStep, "fold_block", wrong)


def test_a_drifting_band_is_promoted_recorded_and_warned_once(monkeypatch):
    _inaccurate_engine(monkeypatch)
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, (3000, 2)), rng.normal(6, 1, (3000, 2))])
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 2)
    with pytest.warns(mixfold.BandPromotionWarning, match="promoted to float32") as caught:
        fit = mixfold.optimize(x, est, precision="bfloat16", max_iter=30, progress=False)
    result = fit.fit_result
    assert len(caught) == 1 and len(result.promotions) == 1
    assert result.promotions[0].endswith("bfloat16 -> float32") and result.precision == "float32"
    assert result.converged and result.stop_reason == "converged"
    lls = np.array(result.log_likelihood)
    assert (np.diff(lls) >= -ROUND_OFF * np.abs(lls[1:])).all()  # the fall was taken back
    ref = mixfold.optimize(x, est, max_iter=30, progress=False)
    enc = ref.encoder().encode(x)
    want = ref.seq_log_density(enc).mean()
    assert abs(fit.seq_log_density(enc).mean() - want) <= FIT_DISTANCE["float32"] * abs(want)


def test_a_plan_promotes_its_drifting_worker(monkeypatch):
    _inaccurate_engine(monkeypatch)
    x, est = _two_gaussians(6000)
    pool = [Worker("fast", precisions=("bfloat16",), base_throughput=2.0),
            Worker("exact", precisions=("float64",))]
    with pytest.warns(mixfold.BandPromotionWarning):
        fit = mixfold.optimize(x, est, resources=pool, precision="auto", max_iter=40,
                               progress=False)
    result = fit.fit_result
    assert result.promotions and result.promotions[0].endswith("bfloat16+float64 -> "
                                                               "float32+float64")
    assert [a.precision for a in result.plan.assignments] == ["float32", "float64"]
    assert len(result.promotions) == 1 and result.converged

