"""The leaves written in the contract's short form fit to the same bits as before it.

Each case fits a family, alone and as a mixture of two (stacked scoring, the fused E-step
where the family has one), on rows that are hard for it: far from the origin, spread over
many orders of magnitude, heavy-tailed, crowded at the ends of the support. ``PINNED`` holds
the fitted parameters (``float.hex``) of main at 1a190e4, before the conversion; regenerate it
with ``python tests/families/test_leaf_bits.py`` (it prints the table) only where a change of
bits is meant.
"""

from __future__ import annotations

import textwrap

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import mixfold
from mixfold import (BetaEstimator, GammaEstimator, GaussianEstimator, LogGaussianEstimator,
                     MixtureEstimator, StudentTEstimator, WeibullEstimator)


def _rng() -> np.random.Generator:
    return np.random.default_rng(20261206)


def _far_gaussians() -> np.ndarray:  # two clusters of unit spread at 1e8
    r = _rng()
    return 1e8 + np.concatenate([r.normal(0.0, 1.0, 3000), r.normal(6.0, 0.5, 2000)])


def _wide_log_gaussians() -> np.ndarray:  # log x at -30 and 25: x over 24 orders of magnitude
    r = _rng()
    return np.exp(np.concatenate([r.normal(-30.0, 2.0, 3000), r.normal(25.0, 4.0, 2000)]))


def _wide_gammas() -> np.ndarray:  # a shape below 1 at 1e-6 beside a shape of 5 at 1e3
    r = _rng()
    x = np.concatenate([r.gamma(0.4, 1e-6, 3000), r.gamma(5.0, 1e3, 2000)])
    return np.maximum(x, np.finfo(float).smallest_subnormal)


def _edge_betas() -> np.ndarray:  # U-shaped rows crowding 0 and 1 beside a peak near 1
    r = _rng()
    x = np.concatenate([r.beta(0.3, 0.4, 3000), r.beta(30.0, 2.0, 2000)])
    return np.clip(x, np.finfo(float).tiny, np.nextafter(1.0, 0.0))


def _wide_weibulls() -> np.ndarray:  # shapes 0.5 and 4 at scales 1e-3 and 1e4
    r = _rng()
    x = np.concatenate([1e-3 * r.weibull(0.5, 3000), 1e4 * r.weibull(4.0, 2000)])
    return np.maximum(x, np.finfo(float).smallest_subnormal)


def _heavy_t() -> np.ndarray:  # nu = 1.5 at 1e6 beside nu = 5 at 1e6 + 50
    r = _rng()
    return 1e6 + np.concatenate([3.0 * r.standard_t(1.5, 3000), 50 + r.standard_t(5.0, 2000)])


#: name -> (rows, estimator, fit options)
CASES: dict[str, tuple[Callable[[], np.ndarray], Callable[[], Any], dict[str, Any]]] = {
    "gaussian": (_far_gaussians, GaussianEstimator, {}),
    "gaussian_float32": (_far_gaussians, GaussianEstimator, {"precision": "float32"}),
    "gaussian_relative": (_far_gaussians, lambda: GaussianEstimator(
        reg_covar=1e-3, reg_covar_mode="relative"), {}),
    "log_gaussian": (_wide_log_gaussians, LogGaussianEstimator, {}),
    "gamma": (_wide_gammas, GammaEstimator, {}),
    "beta": (_edge_betas, BetaEstimator, {}),
    "weibull": (_wide_weibulls, WeibullEstimator, {}),
    "student_t": (_heavy_t, StudentTEstimator, {}),
    "student_t_fixed_nu": (_heavy_t, lambda: StudentTEstimator(nu=2.0, min_sigma2=1e-3), {}),
}


def fitted(name: str) -> list[str]:
    """The parameters of the case's fits, alone and as a mixture of two, as ``float.hex``."""
    rows, make, options = CASES[name]
    x = rows()
    alone = mixfold.fit(x, make(), max_iter=40, tol=0.0, progress=False, **options).model
    mix = mixfold.fit(x, MixtureEstimator([make(), make()]), max_iter=40, tol=0.0, seed=3,
                      progress=False, **options).model
    return [float(v).hex() for v in _numbers(alone.to_dict()) + _numbers(mix.to_dict())]


def _numbers(d: Any) -> list[float]:
    if isinstance(d, dict):
        return [v for k in sorted(d) if k != "family" for v in _numbers(d[k])]
    if isinstance(d, list):
        return [v for item in d for v in _numbers(item)]
    return [d]


PINNED: dict[str, str] = {
    'beta': (
        "0x1.a09bcb2368842p-2 0x1.586e8be0db4d0p-2 0x1.6885b74de1ab7p+4 0x1.9a55d5e59f49cp+0 "
        "0x1.29589ba115a4bp-2 0x1.bd8a55eb0841ap-2 0x1.c5ae442aef431p-2 0x1.1d28ddea885e7p-1"),
    'gamma': (
        "0x1.f87d73fbcacfcp+14 0x1.f64947792be1bp-5 0x1.fb9584107c6ddp-21 0x1.afbe655b3c771p-2 "
        "0x1.e8024a316dcecp+9 0x1.4487ecad6a4eap+2 0x1.3333333333333p-1 0x1.999999999999ap-2"),
    'gaussian': (
        "0x1.7d78409886e69p+26 0x1.2c0275a624048p+3 0x1.7d783ffe7c366p+26 0x1.f8488577964b7p-1 "
        "0x1.7d78417f7fae2p+26 0x1.f61208f94b0cbp-3 0x1.3326d4c951594p-1 0x1.99b2566d5d4d7p-2"),
    'gaussian_float32': (
        "0x1.7d78409886e69p+26 0x1.2c0275a624048p+3 0x1.7d783ffe7c352p+26 0x1.f84854e82d4d7p-1 "
        "0x1.7d78417f7fadbp+26 0x1.f61234a723ccbp-3 0x1.3326d4395753dp-1 0x1.99b2578d51586p-2"),
    'gaussian_relative': (
        "0x1.7d78409886e69p+26 0x1.2c4f40fab919fp+3 0x1.7d783ffe7c387p+26 0x1.f8c9c0bddbd51p-1 "
        "0x1.7d78417f7faf5p+26 0x1.f691ce1c90f9cp-3 0x1.3326d712ef305p-1 0x1.99b251da219f7p-2"),
    'log_gaussian': (
        "-0x1.01a31f9bf13afp+3 0x1.6f24b093e664fp+9 -0x1.e0bccc60e89dbp+4 0x1.f975ff37b5d06p+1 "
        "0x1.8f0f4b0e6f62ep+4 0x1.f4253d3b8f7c1p+3 0x1.3333333333333p-1 0x1.999999999999ap-2"),
    'student_t': (
        "0x1.e84a74b7412adp+19 0x1.71c7aeca63ca4p+4 0x1.54834f56d59fdp+9 0x1.e847ffe4b7d4cp+19 "
        "0x1.70930b8fa1126p+0 0x1.22b184fa79638p+3 0x1.e84e40ae0135bp+19 0x1.fd3eb0e1ff80ep+2 "
        "0x1.11215e7d2d166p+0 0x1.3422b9d2a5bdep-1 0x1.97ba8c5ab4843p-2"),
    'student_t_fixed_nu': (
        "0x1.e849ae650b508p+19 0x1.0000000000000p+1 0x1.fccd7aabc974fp+8 0x1.e847ff5556250p+19 "
        "0x1.0000000000000p+1 0x1.70bca5281c6c4p+3 0x1.e84e40acd11e6p+19 0x1.0000000000000p+1 "
        "0x1.5a857d1f86652p-1 0x1.325bf8948238fp-1 0x1.9b480ed6fb8e2p-2"),
    'weibull': (
        "0x1.866112ddbeb63p+4 0x1.065392ff48041p-3 0x1.0f4db22f7e9f3p-10 0x1.03f828ed2c9a3p-1 "
        "0x1.3ad6065037b43p+13 0x1.03f8eae426611p+2 0x1.3333333333333p-1 0x1.999999999999ap-2"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fit_has_the_bits_it_had_before_the_short_form(name):
    assert fitted(name) == PINNED[name].split()


if __name__ == "__main__":
    for case in sorted(CASES):  # the table above, as it is written
        print(f"    {case!r}: (")
        lines = textwrap.wrap(" ".join(fitted(case)), 88)
        print("\n".join(f'        "{line}{" " * (i < len(lines) - 1)}"'
                        for i, line in enumerate(lines)) + "),")
