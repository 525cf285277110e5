"""Calibration where the work runs: one model and sample measured by ``Resources.calibrate`` on
this machine (one core, pinned) and on each engine's own devices -- Dask workers, Ray nodes
(one task pinned to each), Spark slots -- side by side in one run.

    python benchmarks/calibration.py                  # P1's model (D=10, K=16), 20,000 rows
    python benchmarks/calibration.py --quick          # a smoke run on tiny data

Per engine and band: the best device's rows per second, its ratio to this machine's core, and
the band's measured error of one EM step against float64 (``band_error``; every CPU device of
one run shares it). The engines run with two single-threaded workers (Ray: one node, each
device's task one CPU), so a device's rate is one core's, comparable with the pinned core.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _table import markdown_header, markdown_row  # noqa: E402

import mixfold  # noqa: E402
from mixfold.parallel.resources import Resources  # noqa: E402

ENGINES = ("dask", "ray", "spark")


def p1_model(d: int, k: int, seed: int = 0) -> mixfold.MixtureDistribution:
    """P1's shape: a K-component diagonal Gaussian mixture in D dimensions (fixed seed)."""
    rng = np.random.default_rng(seed)
    comps = [mixfold.DiagonalGaussianDistribution(rng.normal(0, 4, d), rng.uniform(0.5, 2.0, d))
             for _ in range(k)]
    return mixfold.MixtureDistribution(comps, [1.0 / k] * k)


def calibrated(engine: str, model: mixfold.MixtureDistribution, rows: np.ndarray,
               min_seconds: float) -> tuple[Resources, float]:
    """(the engine's devices calibrated where they run, seconds the calibration took)."""
    if engine == "local":
        core = Resources.local().devices[:1]
        return timed(lambda: Resources(core).calibrate(model, rows, min_seconds=min_seconds))
    if engine == "dask":
        from mixfold.backends.dask import local_dask_client

        client = local_dask_client(2)
        try:
            return timed(lambda: Resources.from_dask(client).calibrate(
                model, rows, engine=client, min_seconds=min_seconds))
        finally:
            cluster = client.cluster
            client.close()
            cluster.close()
    if engine == "ray":
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=256 * 1024 * 1024, _node_ip_address="127.0.0.1",
                 configure_logging=False)
        try:
            return timed(lambda: Resources.from_ray().calibrate(model, rows, engine="ray",
                                                                min_seconds=min_seconds))
        finally:
            ray.shutdown()
    from mixfold.backends.spark import local_spark_session, stop_spark_session

    session = local_spark_session(2)
    try:
        return timed(lambda: Resources.from_spark(session).calibrate(
            model, rows, engine=session, min_seconds=min_seconds))
    finally:
        stop_spark_session(session)


def timed(run):
    start = time.perf_counter()
    res = run()
    return res, time.perf_counter() - start


def table(results: dict[str, tuple[Resources, float]]) -> None:
    local = results["local"][0].devices[0]
    print(markdown_header(["engine", "devices", "band", "rows/s (best device)", "x local core",
                           "band_error", "calibrate s"], [False, True, False, True, True, True,
                                                          True]))
    for engine, (res, seconds) in results.items():
        for band in local.band_throughput:
            best = max(d.band_throughput.get(band, 0.0) for d in res.devices)
            error = max(d.band_error.get(band, 0.0) for d in res.devices)
            print(markdown_row([engine, len(res.devices), band, f"{best:,.0f}",
                                f"{best / local.band_throughput[band]:.2f}", f"{error:.2e}",
                                f"{seconds:.1f}"]))
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--min-seconds", type=float, default=0.5,
                        help="each band timed at least this long per device (best repetition)")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"comma-separated, of {','.join(ENGINES)}")
    parser.add_argument("--quick", action="store_true", help="1,000 rows, 0.02 s per band")
    args = parser.parse_args()
    n, min_seconds = (1000, 0.02) if args.quick else (args.rows, args.min_seconds)
    engines = [e for e in args.engines.split(",") if e]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        parser.error(f"--engines: unknown {unknown}, expected some of {list(ENGINES)}")
    model = p1_model(10, 16)
    rows = model.sampler(0).sample(n)
    print(f"P1's model (D=10, K=16), {n:,} rows, at least {min_seconds:g} s per band and device")
    results = {e: calibrated(e, model, rows, min_seconds) for e in ["local", *engines]}
    print()
    table(results)


if __name__ == "__main__":
    main()
