"""The compiled kernels give the statistics the NumPy reference path gives."""

import numpy as np
import pytest

import mixfold.compute.kernels as kernels
from mixfold.precision import FLOAT64

pytestmark = pytest.mark.skipif(not kernels.kernels_available(), reason="numba not installed")


def assert_compiled_equals_numpy(monkeypatch, update):
    """``update()`` -> (log-likelihoods, statistics) with the kernels, then on the NumPy path."""
    compiled = update()
    monkeypatch.setattr(kernels, "_DISABLED", True)
    reference = update()
    np.testing.assert_allclose(compiled[0], reference[0], rtol=1e-12)
    np.testing.assert_allclose(compiled[1], reference[1], rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("terminal", [False, True])
def test_hmm_kernel_equals_numpy_lattice(monkeypatch, terminal):
    from mixfold import GaussianDistribution, GaussianEstimator, HiddenMarkovDistribution
    from mixfold import HiddenMarkovEstimator

    rng = np.random.default_rng(3)
    s = 3
    trans = rng.dirichlet(np.ones(s) * 3, size=s)
    model = HiddenMarkovDistribution([GaussianDistribution(m, 1.0) for m in (-2.0, 0.0, 2.5)],
                                     rng.dirichlet(np.ones(s)), trans,
                                     rng.uniform(0.05, 0.3, s) if terminal else None)
    rows = [rng.normal(0, 2, size=n).tolist() for n in rng.integers(0, 40, size=300)]
    rows[5] = []  # an empty sequence
    est = HiddenMarkovEstimator([GaussianEstimator()] * s, terminal=terminal)
    est = est.bind(est.encoder().fit(rows))
    enc = model.encoder().encode(rows)
    w = rng.uniform(0.5, 2.0, len(rows))

    def update():
        acc = est.accumulator_factory().make()
        ll = acc.seq_update(enc, w, model)
        return ll, acc.to_array()

    assert_compiled_equals_numpy(monkeypatch, update)


def test_every_kernel_is_cacheable():
    # numba keys its disk cache by code and closure: a kernel made in a factory never loads
    import numba

    from mixfold.compute import numba_kernels

    fold = numba_kernels.hmm_fold
    assert fold.py_func.__closure__ is None
    assert fold._cache.__class__.__name__ == "FunctionCache"
    assert len(fold.signatures) == 1  # one explicit signature: no per-layout recompile
    scores = np.asfortranarray(np.zeros((4, 2)))  # any layout goes through that one version
    offsets, weights = np.array([0, 4]), np.ones(1)
    for a in (scores, offsets, weights):  # as a Ray shard or a memory map hands them over
        a.flags.writeable = False
    out = kernels.hmm_forward_backward(scores, offsets, np.array([0.5, 0.5]),
                                       np.full((2, 2), 0.5), np.ones(2), weights)
    np.testing.assert_allclose(out[1], [0.0])  # every emission density 1: likelihood 1
    assert len(fold.signatures) == 1 and isinstance(fold, numba.core.registry.CPUDispatcher)


_LOAD_AND_REPORT = """
import json, time
t = time.perf_counter()
import numpy as np, mixfold
rows = [np.random.default_rng(0).normal(0, 1, size=50).tolist() for _ in range(20)]
mixfold.optimize(rows, mixfold.HiddenMarkovEstimator([mixfold.GaussianEstimator()] * 3),
                 max_iter=2, progress=False)
from mixfold.compute.numba_kernels import hmm_fold
print(json.dumps({"seconds": time.perf_counter() - t,
                  "hits": sum(hmm_fold.stats.cache_hits.values()),
                  "misses": sum(hmm_fold.stats.cache_misses.values())}))
"""


@pytest.mark.slow
def test_the_kernels_compile_once_per_machine(tmp_path):
    # two processes that start together on an empty cache (two mp workers, say): one compiles,
    # the other waits for it and loads; a later process loads too and writes nothing
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", _LOAD_AND_REPORT], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def report(proc: subprocess.Popen) -> dict:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        return json.loads(out.splitlines()[-1])

    def cache_files() -> list[str]:
        return sorted(p.name for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc"))

    together = [report(p) for p in [start(), start()]]
    assert sorted((r["hits"], r["misses"]) for r in together) == [(0, 1), (1, 0)]
    files = cache_files()
    assert len([f for f in files if f.endswith(".nbc")]) == 1
    later = report(start())
    assert (later["hits"], later["misses"]) == (1, 0)  # read back, not compiled
    assert cache_files() == files  # the index was not rewritten with a new entry


@pytest.mark.parametrize("cut", [False, True])
def test_lda_kernels_equal_the_numpy_fixed_point(monkeypatch, cut):
    # serially one fused pass (lda_step), cut over topic ranges the two-phase kernels
    # (lda_norm's partial normalisers summed, then lda_update per range)
    from mixfold import LDADistribution, LDAEstimator

    rng = np.random.default_rng(4)
    k, v = 5, 40
    truth = LDADistribution(rng.gamma(1.0, 1.0, (k, v)), 0.3, vocabulary=range(v),
                            mean_length=30.0)
    docs = truth.sampler(2).sample(300)
    docs[7] = {}  # an empty document
    enc = truth.encoder().encode(docs)
    est = LDAEstimator(k, vocabulary=range(v))
    est = est.bind(est.encoder().fit(docs))
    w = rng.uniform(0.5, 2.0, len(docs))

    def run(task):
        return [task(0, 2), task(2, k)] if cut else [task(0, k)]

    def update():
        acc = est.accumulator_factory().make()
        ll = acc.fold_ranges(enc, w, truth, FLOAT64, run)
        return ll, acc.to_array()

    assert_compiled_equals_numpy(monkeypatch, update)


def _long_sequences(n_rows: int, length: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    scores = rng.normal(-2.0, 1.0, (n_rows * length, 3))
    offsets = np.arange(0, n_rows * length + 1, length)
    step = rng.dirichlet(np.ones(3), 3) * 0.9
    return scores, offsets, np.full(3, 1 / 3), step, np.ones(3), rng.uniform(0.5, 2, n_rows)


@pytest.mark.parametrize("threads", ["2", "3"])
def test_the_hmm_fold_gives_the_same_bits_on_any_number_of_threads(monkeypatch, threads):
    args = _long_sequences(100, 60)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "1")
    serial = kernels.hmm_forward_backward(*args)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", threads)
    for _ in range(3):  # on the threads, then on this thread once measured, then the faster
        threaded = kernels.hmm_forward_backward(*args)
        assert all(np.array_equal(a, b) for a, b in zip(serial, threaded))
    # and they are the forward-backward's: the posteriors of each item add up to its row weight
    rows = np.repeat(np.arange(100), 60)
    np.testing.assert_allclose(serial[0].sum(axis=1), args[5][rows], rtol=1e-12)


_FIT_FORK_FIT = """
import multiprocessing, os
import numpy as np, mixfold as mf

rng = np.random.default_rng(0)
rows = [np.concatenate([rng.normal(0, 1, 150), rng.normal(4, 1, 150)]).tolist()
        for _ in range(40)]


points = rng.normal(size=(40_000, 4)) + rng.integers(0, 3, (40_000, 1)) * 3.0


def fit(seed):  # the fitted HMM's transitions and a Gaussian mixture's weights, as text
    est = mf.HiddenMarkovEstimator([mf.GaussianEstimator()] * 2)
    model = mf.optimize(rows, est, max_iter=5, progress=False, seed=seed)
    gmm = mf.optimize(points, mf.MixtureEstimator([mf.DiagonalGaussianEstimator()] * 3),
                      max_iter=3, progress=False, seed=seed)  # row blocks on the threads too
    return repr([np.asarray(model.transitions).round(10).tolist(),
                 np.sort(gmm.weights).round(10).tolist()])


reference = fit(0)
pid = os.fork()
if pid == 0:  # the child fits on the compiled, threaded path too
    os._exit(0 if fit(0) == reference else 3)
_, status = os.waitpid(pid, 0)
print("fork child exit", os.waitstatus_to_exitcode(status))
with multiprocessing.get_context("fork").Pool(2) as pool:
    print("pool", [r == reference for r in pool.map(fit, [0, 0])])
"""


def test_fit_fork_fit_and_a_fork_pool_after_a_fit():
    # numba's OpenMP layer killed a child forked after a fit, and hung a fork Pool
    import os
    import subprocess
    import sys

    env = {**os.environ, "MIXFOLD_NUM_THREADS": "2"}  # the threaded path, even on one core
    env.pop("OMP_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", _FIT_FORK_FIT], env=env, text=True,
                         capture_output=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["fork child exit 0", "pool [True, True]"]


def test_the_lda_kernels_give_the_same_bits_on_any_number_of_threads(monkeypatch):
    # documents cut into blocks of about equal nonzeros: each document's result is its own
    rng = np.random.default_rng(3)
    sizes = rng.integers(0, 25, 2000)
    sizes[5] = 0
    k, nnz = 10, int(sizes.sum())
    theta, cols = rng.gamma(1.0, 1.0, (2000, k)), rng.gamma(1.0, 1.0, (nnz, k))
    counts, alpha = rng.integers(1, 4, nnz).astype(float), np.full(k, 0.1)

    def run() -> list[np.ndarray]:
        step, update = np.empty((2000, k)), np.empty((2000, k))
        kernels.lda_step(theta, cols, sizes, counts, alpha, step)
        norm = kernels.lda_norm(theta, cols, sizes)
        kernels.lda_update(theta, cols, sizes, counts / norm, alpha, update)
        return [step, norm, update]

    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "1")
    serial = run()
    doc = np.repeat(np.arange(2000), sizes)
    np.testing.assert_allclose(serial[1], np.einsum("ik,ik->i", theta[doc], cols), rtol=1e-12)
    np.testing.assert_allclose(serial[0], serial[2], rtol=1e-12)  # one pass = two passes
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "3")
    for _ in range(3):  # threaded, then on this thread once measured, then the faster
        assert all(np.array_equal(a, b) for a, b in zip(serial, run()))
