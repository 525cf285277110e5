import os
import subprocess
import sys

ENGINES = ["pyspark", "mpi4py", "dask", "distributed", "ray", "torch", "pandas", "pyarrow", "numba",
           "sklearn", "matplotlib", "click", "yaml"]


# heavy modules that `import mixfold` must not load: the optional engines, and what only a fit
# that needs them loads (scipy, threadpoolctl); how long the import takes is measured by
# benchmarks/runtime.py, not asserted here (a busy machine would fail a timed test)
NOT_AT_IMPORT = ENGINES + ["scipy", "threadpoolctl", "llvmlite"]


def test_import_is_light_and_loads_no_optional_engine():
    code = ("import sys; import mixfold; "
            f"print([m for m in {NOT_AT_IMPORT!r} if m in sys.modules]); "
            "print(sorted(m for m in sys.modules if m.startswith('mixfold.compute.numba')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "[]"]


def test_scipy_is_imported_by_the_first_family_that_calls_it():
    # import scipy.special is ~27 MB and ~0.25 s; a Gaussian mixture never calls it (a
    # diagonal one's small-data E-step loads numba, which imports scipy itself)
    code = ("import sys, numpy as np, mixfold as mf; "
            "x = np.random.default_rng(0).normal(size=500); "
            "mf.fit(x, mf.MixtureEstimator([mf.GaussianEstimator()] * 2), max_iter=3, "
            "progress=False, seed=0); print('scipy' in sys.modules); "
            "from mixfold.families.poisson import log_factorial; "
            "print(log_factorial(np.array([4.0, 5000.0])).round(4).tolist(), "
            "'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["False", "[3.1781, 37591.1435] True"]


def test_a_diagonal_mixture_without_the_kernels_loads_neither_numba_nor_scipy():
    # MIXFOLD_DISABLE_KERNELS keeps a small diagonal fit on NumPy's E-step, light to start
    code = ("import sys, numpy as np, mixfold as mf; "
            "x = np.random.default_rng(0).normal(size=(500, 2)); "
            "mf.fit(x, mf.MixtureEstimator([mf.DiagonalGaussianEstimator()] * 2), max_iter=3, "
            "progress=False, seed=0); print('numba' in sys.modules, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "MIXFOLD_DISABLE_KERNELS": "1"})
    assert out.stdout.split() == ["False", "False"]


def test_public_names_have_docstrings():
    import mixfold

    missing = [n for n in mixfold.__all__ if not (getattr(mixfold, n).__doc__ or "").strip()]
    assert missing == []


def test_user_facing_modules_import_only_what_they_use():
    # the spec language, table input and plots load nothing heavy until they are used
    code = ("import sys; import mixfold.spec, mixfold.io.tables, mixfold.plots; "
            f"print([m for m in {ENGINES!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    # the command line needs click, and nothing else optional
    code = ("import sys; import mixfold.cli; "
            f"print([m for m in {ENGINES!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['click']"
