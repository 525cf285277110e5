"""The child side of ``benchmarks/run.py``: generate a data set, or run one library on it.

    python benchmarks/_peers.py generate DATA DATA_DIR SCALE
    python benchmarks/_peers.py run KIND LIBRARY DATA_DIR ITERATIONS RESULT_JSON [--precision P]
                                [--sklearn-timing hook|warm_start]

``generate`` writes data set DATA (``p1``..``p4``, fixed seeds, sizes times SCALE) to DATA_DIR
as ``*.npy`` plus the starting parameters every library starts from (``start.npz``). ``run``:
KIND is the model (``diag_gmm``, ``full_gmm``, ``hmm``, ``records``). The child imports only its
own library, loads the same bytes, runs ITERATIONS EM iterations from the shared start
(initialisation excluded from the timings), records its peak RSS (``ru_maxrss``) right after the
EM loop, then scores the final parameters with the NumPy scorers below (the same code for every
library, after the RSS reading) and writes one JSON object to RESULT_JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import resource
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

LIBRARIES = {  # library name -> the top-level module whose absence means "not installed"
    "mixfold": "mixfold", "mixfold-float32": "mixfold", "scikit-learn": "sklearn",
    "hmmlearn": "hmmlearn", "pomegranate": "pomegranate", "mixle": "mixle",
}
#: how each library's iterations are clocked, for the table: each by a per-iteration stamp from
#: inside its own EM loop (run.py's footnotes give the details)
TIMED_BY = {
    "mixfold": "FitResult.seconds", "mixfold-float32": "FitResult.seconds",
    "scikit-learn": "_print_verbose_msg_iter_end", "hmmlearn": "monitor_.report",
    "mixle": "on_step", "pomegranate": "from_summaries_hook",
}
CHUNK = 16384  # rows per scoring chunk (keeps the scorer's own temporaries small)


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, MiB (Linux reports ru_maxrss in KiB)."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024.0 * 1024.0) if sys.platform == "darwin" else kb / 1024.0


def vm_hwm_mb() -> float | None:
    """The peak RSS of this address space (Linux VmHWM), MiB: a cross-check on ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


# --- data and starting parameters (fixed seeds) ---

def p2_data(n: int, d: int = 10, k: int = 8, seed: int = 1) -> np.ndarray:
    """A K-component full-covariance Gaussian mixture in D dimensions."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 4, size=(k, d))
    chol = rng.normal(0, 0.4, size=(k, d, d)) + np.eye(d)[None] * rng.uniform(0.5, 1.5, (k, 1, 1))
    z = rng.integers(0, k, size=n)
    return means[z] + np.einsum("nij,nj->ni", chol[z], rng.normal(size=(n, d)))


def p3_data(n_seq: int, length: int = 500, s: int = 5, seed: int = 2) -> np.ndarray:
    """``n_seq`` sequences of ``length`` 1-D Gaussian emissions from an S-state sticky HMM."""
    rng = np.random.default_rng(seed)
    means = np.linspace(-4, 4, s) + rng.normal(0, 0.3, s)
    sds = rng.uniform(0.6, 1.2, s)
    trans = np.full((s, s), 0.1 / (s - 1)) + np.eye(s) * (0.9 - 0.1 / (s - 1))
    cum = np.cumsum(trans, axis=1)
    state = rng.integers(0, s, size=n_seq)
    out = np.empty((n_seq, length))
    for t in range(length):
        if t:
            u = rng.random(n_seq)
            state = np.minimum((u[:, None] > cum[state]).sum(axis=1), s - 1)
        out[:, t] = means[state] + sds[state] * rng.normal(size=n_seq)
    return out


def p4_data(n: int, k: int = 8, levels: int = 20, seed: int = 3) -> dict[str, np.ndarray]:
    """A K-component mixture of records: Gaussian float x, categorical c (levels), Poisson n."""
    rng = np.random.default_rng(seed)
    mu, sd = rng.normal(0, 5, k), rng.uniform(0.5, 2.0, k)
    probs = rng.dirichlet(np.full(levels, 0.5), size=k)
    lam = rng.uniform(0.5, 12.0, k)
    z = rng.integers(0, k, size=n)
    u = rng.random(n)
    c = np.minimum((u[:, None] > np.cumsum(probs, axis=1)[z]).sum(axis=1), levels - 1)
    return {"x": mu[z] + sd[z] * rng.normal(size=n), "c": c.astype(np.int64),
            "n": rng.poisson(lam[z]).astype(np.int64)}


def gmm_start(x: np.ndarray, k: int, full: bool, seed: int) -> dict[str, np.ndarray]:
    """K distinct data rows as the means, the data's (co)variance for every component."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(x), size=k, replace=False)
    start = {"w": np.full(k, 1.0 / k), "mu": x[rows].copy()}
    if full:
        start["cov"] = np.repeat(np.cov(x.T)[None], k, axis=0)
    else:
        start["var"] = np.repeat(x.var(axis=0)[None], k, axis=0)
    return start


def hmm_start(seqs: np.ndarray, s: int) -> dict[str, np.ndarray]:
    """Means at the data's quantiles, the data's variance, uniform start, 0.6 self-transition."""
    trans = np.full((s, s), 0.4 / (s - 1)) + np.eye(s) * (0.6 - 0.4 / (s - 1))
    return {"initial": np.full(s, 1.0 / s), "transitions": trans,
            "mu": np.quantile(seqs, (np.arange(s) + 0.5) / s), "var": np.full(s, seqs.var())}


def records_start(d: dict[str, np.ndarray], k: int, levels: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(d["x"]), size=k, replace=False)
    return {"w": np.full(k, 1.0 / k), "mu": d["x"][rows].copy(), "var": np.full(k, d["x"].var()),
            "probs": rng.dirichlet(np.full(levels, 20.0), size=k),
            "lam": d["n"][rows] + 0.5}


def make_p1(scale: float) -> tuple[dict, dict, str]:
    n = max(int(1_000_000 * scale), 20)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from backends import p1_data  # P1's data, shared with benchmarks/backends.py

    x = p1_data(n)
    return {"x": x}, gmm_start(x, 16, full=False, seed=101), f"N={n:,} D=10 K=16"


def make_p2(scale: float) -> tuple[dict, dict, str]:
    n = max(int(200_000 * scale), 20)
    x = p2_data(n)
    return {"x": x}, gmm_start(x, 8, full=True, seed=102), f"N={n:,} D=10 K=8"


def make_p3(scale: float) -> tuple[dict, dict, str]:
    n = max(int(2_000 * scale), 20)
    seqs = p3_data(n)
    return {"seqs": seqs}, hmm_start(seqs, 5), f"{n:,} sequences x 500 steps, 5 states"


def make_p4(scale: float) -> tuple[dict, dict, str]:
    n = max(int(200_000 * scale), 20)
    d = p4_data(n)
    return d, records_start(d, 8, 20, seed=104), f"N={n:,} K=8 (Gaussian, 20 levels, Poisson)"


def make_e1(scale: float) -> tuple[dict, dict, str]:
    """The engines benchmark's model (benchmarks/engines.py): K=4 unit-covariance clusters in D=3
    (means drawn as its are), fitted as full-covariance components."""
    n = max(int(1_000_000 * scale), 20)
    rng = np.random.default_rng(1)
    means = np.random.default_rng(0).normal(0, 4, size=(4, 3))
    x = means[rng.integers(0, 4, size=n)] + rng.normal(size=(n, 3))
    return {"x": x}, gmm_start(x, 4, full=True, seed=105), f"N={n:,} D=3 K=4"


GENERATORS = {"p1": make_p1, "p2": make_p2, "p3": make_p3, "p4": make_p4, "e1": make_e1}


# --- the common scorers: mean log-likelihood per row from final parameters (float64 NumPy) ---

def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.log(np.sum(np.exp(a - m), axis=axis)) + np.squeeze(m, axis=axis)


def score_diag_gmm(x: np.ndarray, w, mu, var) -> float:
    w, mu, var = (np.asarray(a, dtype=np.float64) for a in (w, mu, var))
    const = np.log(w) - 0.5 * (mu.shape[1] * math.log(2 * math.pi) + np.log(var).sum(axis=1))
    total = 0.0
    for a in range(0, len(x), CHUNK):
        xc = x[a:a + CHUNK]
        z = ((xc[:, None, :] - mu[None, :, :]) ** 2 / var[None, :, :]).sum(axis=2)
        total += _logsumexp(const - 0.5 * z, axis=1).sum()
    return total / len(x)


def score_full_gmm(x: np.ndarray, w, mu, cov) -> float:
    w, mu, cov = (np.asarray(a, dtype=np.float64) for a in (w, mu, cov))
    k, d = mu.shape
    chol = np.linalg.cholesky(cov)
    inv_chol = np.stack([np.linalg.inv(c) for c in chol])
    const = (np.log(w) - 0.5 * d * math.log(2 * math.pi)
             - np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1))
    total = 0.0
    for a in range(0, len(x), CHUNK):
        xc = x[a:a + CHUNK]
        lp = np.empty((len(xc), k))
        for j in range(k):
            y = (xc - mu[j]) @ inv_chol[j].T
            lp[:, j] = const[j] - 0.5 * np.einsum("ij,ij->i", y, y)
        total += _logsumexp(lp, axis=1).sum()
    return total / len(x)


def score_hmm(seqs: np.ndarray, initial, transitions, mu, var) -> float:
    """Scaled forward algorithm over equal-length sequences (rows of ``seqs``), no end state."""
    pi, a, mu, var = (np.asarray(v, dtype=np.float64) for v in (initial, transitions, mu, var))
    mu, var = mu.reshape(-1), var.reshape(-1)
    total = 0.0
    for r in range(0, len(seqs), CHUNK):
        s = seqs[r:r + CHUNK]

        def log_emis(t, s=s):
            return -0.5 * (np.log(2 * math.pi * var) + (s[:, t, None] - mu) ** 2 / var)

        le = log_emis(0)
        m = le.max(axis=1, keepdims=True)
        alpha = pi * np.exp(le - m)
        c = alpha.sum(axis=1, keepdims=True)
        ll = np.log(c[:, 0]) + m[:, 0]
        alpha /= c
        for t in range(1, s.shape[1]):
            le = log_emis(t)
            m = le.max(axis=1, keepdims=True)
            alpha = (alpha @ a) * np.exp(le - m)
            c = alpha.sum(axis=1, keepdims=True)
            ll += np.log(c[:, 0]) + m[:, 0]
            alpha /= c
        total += ll.sum()
    return total / len(seqs)


def score_records(x, c, n, w, mu, var, probs, lam) -> float:
    """Mixture of records: Gaussian ``x`` x categorical ``c`` (codes 0..L-1) x Poisson ``n``."""
    w, mu, var, probs, lam = (np.asarray(v, dtype=np.float64) for v in (w, mu, var, probs, lam))
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, int(n.max()) + 1)))])
    with np.errstate(divide="ignore"):
        log_p, log_lam, log_w = np.log(probs), np.log(lam), np.log(w)
    total = 0.0
    for a in range(0, len(x), CHUNK):
        xc, cc, nc = x[a:a + CHUNK], c[a:a + CHUNK], n[a:a + CHUNK]
        lp = (log_w - 0.5 * np.log(2 * math.pi * var) - 0.5 * (xc[:, None] - mu) ** 2 / var
              + log_p[:, cc].T + nc[:, None] * log_lam - lam - log_fact[nc][:, None])
        total += _logsumexp(lp, axis=1).sum()
    return total / len(x)


def score(kind: str, data: dict, p: dict) -> float:
    if kind == "diag_gmm":
        return score_diag_gmm(data["x"], p["w"], p["mu"], p["var"])
    if kind == "full_gmm":
        return score_full_gmm(data["x"], p["w"], p["mu"], p["cov"])
    if kind == "hmm":
        return score_hmm(data["seqs"], p["initial"], p["transitions"], p["mu"], p["var"])
    return score_records(data["x"], data["c"], data["n"], p["w"], p["mu"], p["var"],
                         p["probs"], p["lam"])


# --- the runners: each returns (seconds per iteration, final parameters, notes, threads) ---

def _timed(step, iterations: int) -> list[float]:
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return times


def run_mixfold(kind, data, start, iterations, precision="float64", **_):
    import mixfold as mf

    if kind == "diag_gmm":
        rows = data["x"]
        est = mf.MixtureEstimator([mf.DiagonalGaussianEstimator()] * len(start["w"]))
        init = mf.MixtureDistribution([mf.DiagonalGaussianDistribution(m, v)
                                       for m, v in zip(start["mu"], start["var"])], start["w"])
    elif kind == "full_gmm":
        rows = data["x"]
        est = mf.MixtureEstimator([mf.MultivariateGaussianEstimator()] * len(start["w"]))
        init = mf.MixtureDistribution([mf.MultivariateGaussianDistribution(m, c)
                                       for m, c in zip(start["mu"], start["cov"])], start["w"])
    elif kind == "hmm":
        rows = list(data["seqs"])  # one 1-D array (a view) per sequence
        est = mf.HiddenMarkovEstimator([mf.GaussianEstimator()] * len(start["initial"]))
        init = mf.HiddenMarkovDistribution(
            [mf.GaussianDistribution(m, v) for m, v in zip(start["mu"], start["var"])],
            start["initial"], start["transitions"])
    else:
        rows = {"x": data["x"], "c": data["c"], "n": data["n"]}  # columnar record rows
        est = mf.MixtureEstimator([mf.RecordEstimator({
            "x": mf.GaussianEstimator(), "c": mf.CategoricalEstimator(),
            "n": mf.PoissonEstimator()})] * len(start["w"]))
        levels = list(range(start["probs"].shape[1]))
        init = mf.MixtureDistribution([mf.RecordDistribution({
            "x": mf.GaussianDistribution(m, v), "c": mf.CategoricalDistribution(p, levels=levels),
            "n": mf.PoissonDistribution(lam)})
            for m, v, p, lam in zip(start["mu"], start["var"], start["probs"], start["lam"])],
            start["w"])
    # init=<the shared start>: no initialisation runs; FitResult.seconds is per EM iteration
    res = mf.fit(rows, est, init=init, max_iter=iterations, tol=0.0, seed=0,
                 precision=precision, progress=False)
    notes = [] if res.stop_reason == "max_iter" else [f"stopped early: {res.stop_reason}"]
    model = res.model
    if kind == "diag_gmm":
        p = {"w": model.weights, "mu": [c.mu for c in model.components],
             "var": [c.sigma2 for c in model.components]}
    elif kind == "full_gmm":
        p = {"w": model.weights, "mu": [c.mu for c in model.components],
             "cov": [c.cov for c in model.components]}
    elif kind == "hmm":
        p = {"initial": model.initial, "transitions": model.transitions,
             "mu": [e.mu for e in model.emissions], "var": [e.sigma2 for e in model.emissions]}
    else:
        comps = [c.fields for c in model.components]
        p = {"w": model.weights, "mu": [f["x"].mu for f in comps],
             "var": [f["x"].sigma2 for f in comps],
             "probs": [[f["c"].prob(level) for level in levels] for f in comps],
             "lam": [f["n"].lam for f in comps]}
    return res.seconds, p, notes, _numba_threads()


def _numba_threads() -> dict:
    if "numba" not in sys.modules:
        return {}
    import numba

    return {"numba": numba.config.NUMBA_NUM_THREADS}


def run_sklearn(kind, data, start, iterations, sklearn_timing="hook", **_):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    stamps: list[float] = []

    class StampedGaussianMixture(GaussianMixture):
        # BaseMixture.fit_predict calls these around its own loop: after the start is set, then
        # once at the end of every iteration (verbose=0: the base methods print nothing)
        def _initialize_parameters(self, *args, **kwargs):
            super()._initialize_parameters(*args, **kwargs)
            stamps.append(time.perf_counter())

        def _print_verbose_msg_iter_end(self, n_iter, diff_ll):
            stamps.append(time.perf_counter())
            super()._print_verbose_msg_iter_end(n_iter, diff_ll)

    x = data["x"]
    if kind == "diag_gmm":
        cov_type, precisions = "diag", 1.0 / start["var"]
    else:
        cov_type, precisions = "full", np.linalg.inv(start["cov"])
    one_call = sklearn_timing == "hook"
    gm = StampedGaussianMixture(len(start["w"]), covariance_type=cov_type, tol=0.0,
                                reg_covar=1e-6, weights_init=start["w"], means_init=start["mu"],
                                precisions_init=precisions, init_params="random_from_data",
                                warm_start=not one_call, max_iter=iterations if one_call else 1,
                                random_state=0)
    notes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if one_call:
            # one fit(): its own loop, tol=0 (|change| < 0 never holds: all iterations run)
            gm.fit(x)
            times = list(np.diff(stamps))
            notes.append("timed: one fit(max_iter) by per-iteration hooks inside its loop "
                         "(after _initialize_parameters, at _print_verbose_msg_iter_end)")
        else:
            # call 1 initialises from *_init (= the shared start) and runs iteration 1; calls
            # 2.. continue by warm start. Each fit() also validates X and runs a final E-step.
            times = _timed(lambda: gm.fit(x), iterations)
            notes.append("timed: warm_start fit(max_iter=1) calls; call 1 includes the init")
    rss = peak_rss_mb(), vm_hwm_mb()
    p = {"w": gm.weights_.copy(), "mu": gm.means_.copy(),
         ("var" if kind == "diag_gmm" else "cov"): gm.covariances_.copy()}
    if not one_call:
        # for reference (after the RSS reading, the final parameters already taken): what one
        # iteration of sklearn's own loop costs without the per-call overhead of fit()
        def body():
            _, log_resp = gm._e_step(x)
            gm._m_step(x, log_resp)

        e_step = statistics.median(_timed(lambda: gm._e_step(x), 2))
        loop = statistics.median(_timed(body, 2))
        notes.append(f"for reference: fit()'s final E-step ~{e_step:.4g} s/call; its loop body "
                     f"alone (_e_step + _m_step) ~{loop:.4g} s/iteration")
    return times, p, notes, {}, rss


def run_hmmlearn(kind, data, start, iterations, **_):
    from hmmlearn.base import ConvergenceMonitor
    from hmmlearn.hmm import GaussianHMM

    stamps: list[float] = []

    class StampedMonitor(ConvergenceMonitor):
        # fit() resets the monitor after its init and reports to it after every M-step
        def _reset(self):
            super()._reset()
            stamps.append(time.perf_counter())

        def report(self, log_prob):
            stamps.append(time.perf_counter())
            super().report(log_prob)

        @property
        def converged(self):
            return self.iter == self.n_iter  # a fixed iteration count, as for every library

    seqs = data["seqs"]
    x = seqs.reshape(-1, 1)
    lengths = np.full(len(seqs), seqs.shape[1])
    s = len(start["initial"])
    hmm = GaussianHMM(s, covariance_type="diag", implementation="scaling", n_iter=iterations,
                      tol=0.0, init_params="", params="stmc", covars_prior=0.0, random_state=0)
    hmm.monitor_ = StampedMonitor(hmm.tol, iterations, verbose=False)
    hmm.startprob_ = start["initial"]
    hmm.transmat_ = start["transitions"]
    hmm.means_ = start["mu"].reshape(s, 1)
    hmm.covars_ = start["var"].reshape(s, 1)
    hmm.fit(x, lengths)
    times = list(np.diff(stamps))
    p = {"initial": hmm.startprob_, "transitions": hmm.transmat_, "mu": hmm.means_[:, 0],
         "var": np.asarray(hmm._covars_)[:, 0]}
    return times, p, ["timed: one fit(n_iter) by its convergence monitor (reset after the init, "
                      "report after each M-step); init_params='' (covars_prior=0: plain ML)"], {}


def run_pomegranate(kind, data, start, iterations, **_):
    import torch
    from pomegranate.distributions import Normal

    def t(a):  # float32 throughout: see main()
        return torch.as_tensor(np.asarray(a, dtype=np.float32))

    threads = {"torch": torch.get_num_threads()}
    if kind == "hmm":
        from pomegranate.hmm import DenseHMM

        seqs = data["seqs"]
        x = torch.from_numpy(seqs).unsqueeze(-1)  # (n, T, 1), float32
        s, n_steps = len(start["initial"]), seqs.shape[1]
        end = 1.0 / n_steps  # pomegranate always models an end state; start it at 1/T
        model = DenseHMM([Normal(t([m]), t([v]), covariance_type="diag")
                          for m, v in zip(start["mu"], start["var"])],
                         edges=t(start["transitions"] * (1.0 - end)), starts=t(start["initial"]),
                         ends=t(np.full(s, end)))
    else:
        from pomegranate.gmm import GeneralMixtureModel

        x = torch.from_numpy(data["x"])
        if kind == "diag_gmm":
            dists = [Normal(t(m), t(v), covariance_type="diag")
                     for m, v in zip(start["mu"], start["var"])]
        else:
            dists = [Normal(t(m), t(c), covariance_type="full")
                     for m, c in zip(start["mu"], start["cov"])]
        model = GeneralMixtureModel(dists, priors=t(start["w"]))

    # its fit loop runs summarize(...) then from_summaries() once per iteration: stamp the loop's
    # first summarize and every from_summaries; tol=-inf and max_iter: every iteration runs
    stamps: list[float] = []
    summarize, from_summaries = model.summarize, model.from_summaries

    def stamped_summarize(*args, **kwargs):
        if not stamps:
            stamps.append(time.perf_counter())
        return summarize(*args, **kwargs)

    def stamped_from_summaries():
        from_summaries()
        stamps.append(time.perf_counter())

    model.summarize, model.from_summaries = stamped_summarize, stamped_from_summaries
    model.max_iter, model.tol, model.verbose = iterations, -math.inf, False
    model.fit(x)
    times = list(np.diff(stamps))
    notes = ["timed: one fit() by hooks on its loop (first summarize, each from_summaries), "
             "float32"]
    with torch.no_grad():
        if kind == "hmm":
            edges = torch.exp(model.edges).double().numpy()  # float64 before renormalising
            p = {"initial": torch.exp(model.starts).double().numpy(),
                 "transitions": edges / edges.sum(axis=1, keepdims=True),
                 "mu": [d.means.numpy()[0] for d in model.distributions],
                 "var": [d.covs.numpy()[0] for d in model.distributions]}
            notes.append("scored without its end state (transition rows renormalised)")
        else:
            p = {"w": model.priors.numpy(), "mu": [d.means.numpy() for d in model.distributions],
                 ("var" if kind == "diag_gmm" else "cov"):
                     [d.covs.numpy() for d in model.distributions]}
    return times, p, notes, threads


def run_mixle(kind, data, start, iterations, **_):
    from mixle.engines import FUSED_NUMPY_ENGINE
    from mixle.inference import optimize
    from mixle.stats import (CategoricalDistribution, CategoricalEstimator, CompositeDistribution,
                             CompositeEstimator, DiagonalGaussianDistribution,
                             DiagonalGaussianEstimator, GaussianDistribution, GaussianEstimator,
                             MixtureDistribution, MixtureEstimator, PoissonDistribution,
                             PoissonEstimator, seq_encode)
    from mixle.utils.optional_deps import HAS_NUMBA

    k = len(start["w"])
    if kind == "diag_gmm":
        rows = data["x"]
        d = rows.shape[1]
        est = MixtureEstimator([DiagonalGaussianEstimator(dim=d)] * k)
        init = MixtureDistribution([DiagonalGaussianDistribution(m, v)
                                    for m, v in zip(start["mu"], start["var"])], start["w"])
    elif kind == "records":
        # mixle's record: a CompositeDistribution over (float, level, count) tuples
        rows = list(zip(data["x"].tolist(), data["c"].tolist(), data["n"].tolist()))
        n_levels = start["probs"].shape[1]
        est = MixtureEstimator([CompositeEstimator([GaussianEstimator(), CategoricalEstimator(),
                                                    PoissonEstimator()])] * k)
        init = MixtureDistribution([CompositeDistribution([
            GaussianDistribution(m, v),
            CategoricalDistribution({j: float(p[j]) for j in range(n_levels)}),
            PoissonDistribution(lam)])
            for m, v, p, lam in zip(start["mu"], start["var"], start["probs"], start["lam"])],
            start["w"])
    else:
        raise ValueError(f"no mixle runner for {kind}")
    enc = seq_encode(rows, model=init)
    stamps = []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # engine=FUSED_NUMPY_ENGINE: mixle's single-pass fused numba E-step (forced on; its own
        # auto-fusion gate only engages it above ~1.5e6 row-iterations); delta=None: fixed count
        model = optimize(None, est, prev_estimate=init, enc_data=enc, max_its=iterations,
                         delta=None, engine=FUSED_NUMPY_ENGINE, out=None,
                         on_step=lambda _s: stamps.append(time.perf_counter()))
    times = list(np.diff([t0, *stamps]))
    notes = ["timed: gaps between optimize(on_step=...) callbacks (iteration 1 includes the "
             "numba compile)", f"numba {'on' if HAS_NUMBA else 'MISSING'}"]
    if len(times) < iterations:
        notes.append(f"stopped after {len(times)} iterations")
    if kind == "diag_gmm":
        p = {"w": model.w, "mu": [c.mu for c in model.components],
             "var": [c.covar for c in model.components]}
    else:
        parts = [c.dists for c in model.components]
        p = {"w": model.w, "mu": [g.mu for g, _, _ in parts],
             "var": [g.sigma2 for g, _, _ in parts],
             "probs": [[cat.pmap.get(j, 0.0) for j in range(n_levels)] for _, cat, _ in parts],
             "lam": [pois.lam for _, _, pois in parts]}
    return times, p, notes, _numba_threads()


RUNNERS = {"mixfold": run_mixfold, "mixfold-float32": run_mixfold, "scikit-learn": run_sklearn,
           "hmmlearn": run_hmmlearn, "pomegranate": run_pomegranate, "mixle": run_mixle}


def read_npy(path: Path, dtype=None) -> np.ndarray:
    """``np.load(path)``; with ``dtype``, read in chunks straight into an array of that dtype
    (floats only), so the file's own dtype never sits in memory whole."""
    if dtype is None:
        return np.load(path)
    with open(path, "rb") as f:
        fmt = np.lib.format
        reader = {(1, 0): fmt.read_array_header_1_0,
                  (2, 0): fmt.read_array_header_2_0}.get(fmt.read_magic(f))
        shape, fortran, src = reader(f) if reader else ((), True, np.dtype(object))
        if fortran or src.kind != "f":
            return np.load(path).astype(dtype) if src.kind == "f" else np.load(path)
        out = np.empty(shape, dtype=dtype)
        flat = out.reshape(-1)
        step = 1 << 20
        buf = np.empty(step, dtype=src)
        for a in range(0, flat.size, step):
            b = min(a + step, flat.size)
            f.readinto(memoryview(buf[:b - a]).cast("B"))
            flat[a:b] = buf[:b - a]
    return out


def load_case(data_dir: Path, dtype=None) -> tuple[dict, dict]:
    data = {p.stem: read_npy(p, dtype) for p in sorted(data_dir.glob("*.npy"))}
    with np.load(data_dir / "start.npz") as z:
        start = {k: z[k] for k in z.files}
    return data, start


def generate(key: str, directory: Path, scale: float) -> None:
    """Write data set ``key`` (``*.npy``) and its starting parameters (``start.npz``)."""
    data, start, size = GENERATORS[key](scale)
    directory.mkdir(parents=True, exist_ok=True)
    for name, arr in data.items():
        np.save(directory / f"{name}.npy", np.ascontiguousarray(arr))
    np.savez(directory / "start.npz", **start)
    threads = {}
    try:
        from threadpoolctl import threadpool_info

        threads["blas"] = sorted({f"{p.get('internal_api')}:{p.get('num_threads')}"
                                  for p in threadpool_info()})
    except ImportError:
        pass
    print(json.dumps({"size": size, "bytes": int(sum(a.nbytes for a in data.values())),
                      "threads": threads}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("key", choices=sorted(GENERATORS))
    gen.add_argument("data_dir", type=Path)
    gen.add_argument("scale", type=float)
    run = sub.add_parser("run")
    run.add_argument("kind", choices=["diag_gmm", "full_gmm", "hmm", "records"])
    run.add_argument("library", choices=sorted(RUNNERS))
    run.add_argument("data_dir", type=Path)
    run.add_argument("iterations", type=int)
    run.add_argument("result", type=Path)
    run.add_argument("--precision", default="float64")
    run.add_argument("--sklearn-timing", default="hook", choices=["hook", "warm_start"])
    args = ap.parse_args()
    if args.command == "generate":
        generate(args.key, args.data_dir, args.scale)
        return
    out: dict = {"library": args.library}
    try:
        try:
            importlib.import_module(LIBRARIES[args.library])
        except ImportError as err:
            out.update(status="not installed", detail=str(err))
            return
        out["baseline_rss_mb"] = peak_rss_mb()  # interpreter + the library's import
        # pomegranate computes in float32 whatever it is given (its modules take the dtype of
        # their float32 ``_device`` parameter, statistics buffers included): it gets float32 data
        dtype = np.float32 if args.library == "pomegranate" else None
        data, start = load_case(args.data_dir, dtype)
        got = RUNNERS[args.library](args.kind, data, start, args.iterations,
                                    precision=args.precision, sklearn_timing=args.sklearn_timing)
        rss, hwm = peak_rss_mb(), vm_hwm_mb()
        times, params, notes, threads = got[:4]
        if len(got) > 4:  # the runner read its RSS before doing extra measurements
            rss, hwm = got[4]
        if dtype is not None:
            del data
            data, _ = load_case(args.data_dir)  # the scorer reads the float64 bytes
        timed_by = "fit(max_iter=1)_calls" if args.sklearn_timing == "warm_start" and \
            args.library == "scikit-learn" else TIMED_BY[args.library]
        out.update(status="ok", seconds=[float(s) for s in times], peak_rss_mb=rss,
                   timed_by=timed_by, vm_hwm_mb=hwm, notes=notes, threads=threads,
                   log_likelihood=float(score(args.kind, data, params)))
    except Exception as err:  # noqa: BLE001 - reported in the table, the harness goes on
        out.update(status="failed", detail=f"{type(err).__name__}: {err}",
                   traceback=traceback.format_exc())
    finally:
        args.result.write_text(json.dumps(out))
        sys.stdout.flush()
        os._exit(0)  # skip interpreter teardown (torch/numba atexit work is not measured)


if __name__ == "__main__":
    main()
