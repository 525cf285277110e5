"""Planner benchmark: how long ``decompose_model`` takes on a 10,000-component model.

    python benchmarks/planner.py                      # 10,000 components (target: < 1 s a plan)
    python benchmarks/planner.py --components 500 --repeats 2     # a smoke run

The model is a record whose ``visits`` field is a sequence (Poisson lengths) of items drawn from
a mixture of ``--components`` diagonal Gaussians in 8 dimensions, beside a 20-level categorical
field: the planner has to search the whole tree, find the mixture two levels down, and cut it
over 8 devices of mixed speeds and bounded memory. Reported: the seconds to build the model
(not planning), the median and best seconds of ``--repeats`` plans, the plan itself
(``ModelDecomposition.describe()``), and, when the seed system (``mixle``) is installed, its
planner's seconds on a plain mixture of as many univariate Gaussians, for reference.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from mixfold import (
    CategoricalDistribution,
    DiagonalGaussianDistribution,
    MixtureDistribution,
    PoissonDistribution,
    RecordDistribution,
    SequenceDistribution,
)
from mixfold.parallel.model_decomposition import decompose_model
from mixfold.parallel.resources import DeviceSpec, Resources

TARGET_SECONDS = 1.0
DIM = 8


def build_model(components: int) -> RecordDistribution:
    rng = np.random.default_rng(0)
    means = rng.normal(0, 4, size=(components, DIM))
    variances = rng.uniform(0.5, 2.0, size=(components, DIM))
    mixture = MixtureDistribution(
        [DiagonalGaussianDistribution(m, v) for m, v in zip(means, variances)],
        np.full(components, 1 / components))
    return RecordDistribution({
        "country": CategoricalDistribution(np.full(20, 1 / 20)),
        "visits": SequenceDistribution(mixture, PoissonDistribution(6.0)),
    })


def eight_devices(model_bytes: int) -> Resources:
    """Six CPU cores and two GPUs four times as fast; each may hold 60% of the model."""
    room = int(0.6 * model_bytes)
    cpus = [DeviceSpec(f"cpu:{i}", "cpu", 1.0, room) for i in range(6)]
    gpus = [DeviceSpec(f"gpu:{i}", "gpu", 4.0, room, ("float16", "float32", "float64"))
            for i in range(2)]
    return Resources(tuple(cpus + gpus))


def time_calls(fn, repeats: int) -> list[float]:
    seconds = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - t)
    return seconds


def seed_system_seconds(components: int, repeats: int) -> list[float] | None:
    """The seed system's planner on a mixture of ``components`` univariate Gaussians."""
    try:
        from mixle.stats import GaussianDistribution as SeedGaussian
        from mixle.stats import MixtureDistribution as SeedMixture
        from mixle.utils.parallel.model_decomposition import decompose_model as seed_decompose
        from mixle.utils.parallel.planner import Resources as SeedResources
    except ImportError:
        return None
    model = SeedMixture([SeedGaussian(float(i), 1.0) for i in range(components)],
                        np.full(components, 1 / components))
    resources = SeedResources.local(num_cpus=8)
    return time_calls(lambda: seed_decompose(model, resources, prefer_data_parallel=False),
                      repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--components", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-seed", action="store_true", help="skip the seed system's planner")
    args = parser.parse_args()

    t = time.perf_counter()
    model = build_model(args.components)
    build = time.perf_counter() - t
    probe = decompose_model(model, Resources((DeviceSpec("probe"),)))
    resources = eight_devices(probe.model_bytes)
    plans = []
    seconds = time_calls(lambda: plans.append(decompose_model(model, resources)), args.repeats)
    plan = plans[-1]
    assert plan.is_model_parallel and plan.path == "visits/item", plan.describe()

    print(f"model: record > sequence > mixture of {args.components} diagonal Gaussians "
          f"(D={DIM}); built in {build:.3f} s")
    print(plan.describe())
    median = statistics.median(seconds)
    verdict = "within" if median < TARGET_SECONDS else "OVER"
    print(f"planning: median {median:.3f} s, best {min(seconds):.3f} s over {args.repeats} "
          f"runs ({verdict} the {TARGET_SECONDS:g} s target)")
    if not args.no_seed:
        seed = seed_system_seconds(args.components, args.repeats)
        if seed is None:
            print("seed system (mixle): not installed")
        else:
            print(f"seed system (mixle), plain mixture of {args.components} Gaussians: median "
                  f"{statistics.median(seed):.3f} s, best {min(seed):.3f} s")


if __name__ == "__main__":
    main()
