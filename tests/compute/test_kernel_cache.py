"""Compiled kernels load whatever the file system does: a read-only install without a writable
HOME, nothing writable at all, a damaged cache entry, a link or a directory planted where the
first-load lock goes. Each case runs in a child process under a timeout.

The slow test installs mixfold with pip (not editable) into a temporary prefix; the quick ones
copy the package's files there (the same tree, without a build). "Unwritable" is emulated so
that it holds for root too (who writes through any mode bits): the installed tree is made
read-only (mode 0555) *and* has a regular file where each ``__pycache__`` directory would go,
HOME is a path below a regular file, and where no temporary directory may be writable the
child sets ``tempfile.tempdir`` to such a path (``gettempdir`` would otherwise fall back to
/tmp). Creating anything below a file fails with ENOTDIR for every user.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

SRC = Path(__file__).resolve().parents[2] / "src"

# a kernel module of one small kernel, loaded the way mixfold loads its own (quick to compile)
TINY_KERNELS = '''
import numba
from mixfold.compute.kernel_cache import on_disk

@numba.njit("float64(float64)", cache=on_disk())
def twice(x):
    return 2.0 * x
'''
LOAD_TINY = ("import warnings; warnings.simplefilter('always'); "
             "from mixfold.compute.kernel_cache import load_kernel_module; "
             "k = load_kernel_module('tiny_kernels').twice; "
             "print(k(21.0), sum(k.stats.cache_hits.values()))")


@pytest.fixture
def scratch(tmp_path):
    yield tmp_path
    for path in [tmp_path, *tmp_path.rglob("*")]:  # read-only trees: writable again to remove
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)


def _unwritable(root: Path) -> Path:
    """A path no one can create: below a regular file."""
    (root / "a-file").write_text("")
    return root / "a-file" / "below"


def _read_only_install(root: Path, extra: dict[str, str] | None = None) -> Path:
    """mixfold's files copied into a prefix (what a non-editable pip install puts in
    site-packages: see :func:`_pip_install`, which the slow test runs), with ``extra`` modules
    beside it, then made read-only."""
    site = root / "site-packages"
    shutil.copytree(SRC / "mixfold", site / "mixfold",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name, text in (extra or {}).items():
        (site / f"{name}.py").write_text(text)
    folders = [site, *(p for p in site.rglob("*") if p.is_dir())]
    for folder in folders:
        (folder / "__pycache__").write_text("")  # numba's place beside the source: taken
    for path in [*site.rglob("*"), site]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    return site


def _run(code: str, site: Path, home: Path, tmp: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("NUMBA_", "XDG_", "PYTHON", "MIXFOLD_"))}
    child_env = {**base, "PYTHONPATH": str(site), "HOME": str(home), "TMPDIR": str(tmp),
                 "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run([sys.executable, "-c", code], env=child_env, text=True,
                          capture_output=True, timeout=300, cwd=str(tmp))


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "KernelCacheWarning" in line]


def test_read_only_install_caches_in_a_private_temporary_directory(scratch):
    site = _read_only_install(scratch / "prefix", {"tiny_kernels": TINY_KERNELS})
    home, tmp = _unwritable(scratch), scratch / "tmp"
    tmp.mkdir()
    first = _run(LOAD_TINY, site, home, tmp)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["42.0", "0"]  # compiled
    (said,) = _warnings(first.stderr)  # where the cache went, once
    private = tmp / f"mixfold-{os.getuid()}"
    assert str(private / "numba-cache") in said
    assert (private.stat().st_mode & 0o777) == 0o700
    again = _run(LOAD_TINY, site, home, tmp)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == ["42.0", "1"]  # read from that cache, silently
    assert _warnings(again.stderr) == []


def test_nothing_writable_compiles_in_memory(scratch):
    site = _read_only_install(scratch / "prefix", {"tiny_kernels": TINY_KERNELS})
    nowhere = _unwritable(scratch)
    out = _run(f"import tempfile; tempfile.tempdir = {str(nowhere)!r}; " + LOAD_TINY, site,
               nowhere, scratch, TMPDIR=str(nowhere))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["42.0", "0"]
    (said,) = _warnings(out.stderr)
    assert "compiled in memory" in said


@pytest.mark.parametrize("damage", ["truncated data", "garbled index"])
def test_a_damaged_cache_entry_is_discarded_and_compiled_again(scratch, damage):
    site = scratch / "site"
    site.mkdir()
    (site / "tiny_kernels.py").write_text(TINY_KERNELS)
    cache = scratch / "cache"
    code = f"import sys; sys.path.insert(0, {str(SRC)!r}); " + LOAD_TINY

    def run() -> subprocess.CompletedProcess:
        return _run(code, site, scratch, scratch,
                    NUMBA_CACHE_DIR=str(cache))

    assert run().stdout.split() == ["42.0", "0"]
    suffix = ".nbc" if damage == "truncated data" else ".nbi"
    (entry,) = [p for p in cache.rglob(f"tiny_kernels.*{suffix}")]
    entry.write_bytes(entry.read_bytes()[:40] if suffix == ".nbc" else b"\x80\x04garbage")
    repaired = run()
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout.split() == ["42.0", "0"]  # compiled again
    (said,) = _warnings(repaired.stderr)
    assert "damaged" in said and entry.name in said
    later = run()
    assert later.stdout.split() == ["42.0", "1"] and _warnings(later.stderr) == []


def test_a_kernel_that_does_not_compile_raises_its_error_and_keeps_the_cache(scratch):
    """numba's typing error is the kernel's bug, not a damaged cache: it is raised as it is and
    the cached entries stay."""
    site = scratch / "site"
    site.mkdir()
    (site / "tiny_kernels.py").write_text(TINY_KERNELS)
    cache = scratch / "cache"
    code = f"import sys; sys.path.insert(0, {str(SRC)!r}); " + LOAD_TINY
    assert _run(code, site, scratch, scratch, NUMBA_CACHE_DIR=str(cache)).returncode == 0
    entries = sorted(p.name for p in cache.rglob("tiny_kernels.*"))
    (site / "tiny_kernels.py").write_text(TINY_KERNELS + """
@numba.njit("float64(float64)", cache=on_disk())
def wrong(x):
    return x + "a string"
""")
    out = _run(code, site, scratch, scratch, NUMBA_CACHE_DIR=str(cache))
    assert out.returncode != 0 and "TypingError" in out.stderr
    assert _warnings(out.stderr) == []
    assert sorted(p.name for p in cache.rglob("tiny_kernels.*")) == entries


@pytest.mark.parametrize("plant", ["link to a file", "dangling link", "directory",
                                   "link for the whole directory"])
def test_whatever_is_planted_at_the_lock_never_stops_a_load(scratch, plant):
    # another local user can create names in a shared /tmp before this user's first fit
    site = scratch / "site"
    site.mkdir()
    (site / "tiny_kernels.py").write_text(TINY_KERNELS)
    private = scratch / f"mixfold-{os.getuid()}"
    victim = scratch / "victim"
    if plant == "link for the whole directory":
        victim.mkdir()
        private.symlink_to(victim)
    else:
        private.mkdir(mode=0o700)
        lock = private / "numba.lock"
        if plant == "directory":
            lock.mkdir()
        else:
            if plant == "link to a file":
                victim.write_text("not yours")
            lock.symlink_to(victim)
    code = f"import sys; sys.path.insert(0, {str(SRC)!r}); " + LOAD_TINY
    out = _run(code, site, scratch, scratch,
               NUMBA_CACHE_DIR=str(scratch / "cache"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "42.0"
    if plant == "link to a file":
        assert victim.read_text() == "not yours"
    elif plant == "dangling link":
        assert not victim.exists()  # the link was not followed to create its target
    elif plant == "link for the whole directory":
        assert list(victim.iterdir()) == []


HMM_AND_LDA_FIT = """
import warnings; warnings.simplefilter("always")
import numpy as np, mixfold as mf
rng = np.random.default_rng(0)
rows = [rng.normal(size=40).tolist() for _ in range(10)]
m = mf.optimize(rows, mf.HiddenMarkovEstimator([mf.GaussianEstimator()] * 2), max_iter=3,
                progress=False, seed=0)
docs = [{int(w): 1 for w in rng.integers(0, 20, 8)} for _ in range(30)]
lda = mf.optimize(docs, mf.LDAEstimator(2, vocabulary=range(20)), max_iter=2, progress=False,
                  seed=0)
from mixfold.compute.kernels import _KERNELS
print(mf.__file__)
print(sorted(k for k in ("hmm", "lda_norm") if k in _KERNELS))
"""


def _pip_install(root: Path) -> Path:
    """mixfold installed by pip, not editable, into a prefix (from a copy of the project, so
    the build writes nothing into the source tree), then made read-only."""
    project = root / "project"
    project.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (SRC.parent / name).exists():
            shutil.copy(SRC.parent / name, project / name)
    shutil.copytree(SRC, project / "src", ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", "*.egg-info"))
    site = root / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                    "--no-compile", "--quiet", "--target", str(site), str(project)],
                   check=True, capture_output=True, timeout=300)
    for folder in [site, *(p for p in site.rglob("*") if p.is_dir())]:
        (folder / "__pycache__").write_text("")  # numba's place beside the source: taken
    for path in [*site.rglob("*"), site]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    return site


@pytest.mark.slow
def test_hmm_and_lda_fit_from_a_read_only_install_without_a_writable_home(scratch):
    # the reported failure: "cannot cache function 'hmm_fold': no locator available"
    site = _pip_install(scratch / "prefix")
    home, tmp = _unwritable(scratch), scratch / "tmp"
    tmp.mkdir()
    out = _run(HMM_AND_LDA_FIT, site, home, tmp)
    assert out.returncode == 0, out.stderr
    where, ran = out.stdout.splitlines()[-2:]
    assert where.startswith(str(site))  # the installed copy, not the source tree
    assert ran == "['hmm', 'lda_norm']"  # the compiled paths ran
    assert len(_warnings(out.stderr)) == 2  # one per kernel module: where its cache went
