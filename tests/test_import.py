import subprocess
import sys

ENGINES = ["pyspark", "mpi4py", "dask", "distributed", "ray", "torch", "pandas", "pyarrow",
           "sklearn", "matplotlib", "click", "yaml"]


def test_import_is_light_and_loads_no_optional_engine():
    code = ("import sys, time; t = time.perf_counter(); import mixfold; "
            "print(time.perf_counter() - t); "
            f"print([m for m in {ENGINES!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, loaded = out.stdout.splitlines()
    assert loaded == "[]"
    assert float(seconds) < 1.0


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
