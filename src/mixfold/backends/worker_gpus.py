"""Which CUDA device a planned GPU shard runs on, decided where it runs.

A plan names an engine's GPU by the engine's own count (``dask:<address>:gpu<k>``,
``ray:<node>:gpu<k>``) and its precision says only ``<band>@cuda``: the driver cannot know which
CUDA device that is on the worker. The task that folds the shard decides, from what the engine
shows it there: on Dask the worker's k-th declared GPU is the k-th CUDA device the worker sees
(:func:`dask_cuda_device`); on Ray the task given ``num_gpus=1`` runs on the GPU Ray gave it
(``ray.get_gpu_ids()``), at its place in the ``CUDA_VISIBLE_DEVICES`` Ray set for the task
(:func:`ray_cuda_device`); on Spark the task holding a ``gpu`` resource runs on the address Spark
gave it (:func:`spark_cuda_device`; Spark's local mode gives none, so its GPU shards stay on
``cuda``). :func:`on_cuda_device` then moves the task's precision there; a
task whose precision runs on no CUDA device (:func:`runs_on_cuda`) asks nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mixfold.precision import Precision, resolve_precision

__all__ = ["gpu_index", "visible_cuda_devices", "dask_cuda_device", "ray_cuda_device",
           "spark_cuda_device", "given_cuda_device", "runs_on_cuda", "on_cuda_device"]


def gpu_index(device: str) -> int | None:
    """``k`` of an engine's GPU device named ``...:gpu<k>``, else None.

    >>> gpu_index("dask:tcp://127.0.0.1:4001:gpu1"), gpu_index("ray:ab12:gpu0")
    (1, 0)
    >>> gpu_index("ray:ab12") is None
    True
    """
    found = re.fullmatch(r".+:gpu(\d+)", device)
    return int(found.group(1)) if found else None


def visible_cuda_devices(visible: str | None) -> list[str] | None:
    """The entries of a ``CUDA_VISIBLE_DEVICES`` value in order (``None``: unset, every device
    visible). CUDA ignores an entry that is negative and every one after it.

    >>> visible_cuda_devices("2,0"), visible_cuda_devices(None), visible_cuda_devices("1,-1,2")
    (['2', '0'], None, ['1'])
    >>> visible_cuda_devices("")
    []
    """
    if visible is None:
        return None
    entries = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def dask_cuda_device(k: int, visible: str | None) -> str:
    """The torch device of a Dask worker's ``k``-th declared GPU: ``cuda:<k>``, the k-th CUDA
    device the worker sees (``visible``: its ``CUDA_VISIBLE_DEVICES``, which a per-worker
    launcher such as dask-cuda sets with the worker's own GPU first).

    >>> dask_cuda_device(1, None), dask_cuda_device(0, "3,1")
    ('cuda:1', 'cuda:0')
    >>> dask_cuda_device(1, "3")
    Traceback (most recent call last):
    ...
    RuntimeError: dask: this worker declares GPU 1 but sees 1 CUDA device (CUDA_VISIBLE_DEVICES='3')
    """
    seen = visible_cuda_devices(visible)
    if k < 0 or (seen is not None and k >= len(seen)):
        count = "no" if seen is None else len(seen)
        raise RuntimeError(f"dask: this worker declares GPU {k} but sees {count} CUDA device"
                           f"{'' if count == 1 else 's'} (CUDA_VISIBLE_DEVICES={visible!r})")
    return f"cuda:{k}"


def ray_cuda_device(gpu_ids: Sequence[object], visible: str | None) -> str:
    """The torch device of the GPU Ray gave a task (``gpu_ids``: ``ray.get_gpu_ids()`` in the
    task; ``visible``: its ``CUDA_VISIBLE_DEVICES``): Ray restricts the task to its GPUs, so the
    first one's place in that list; unrestricted (Ray told not to set it), the GPU's own index.

    >>> ray_cuda_device([3], "3"), ray_cuda_device(["1"], "0,1"), ray_cuda_device([2], None)
    ('cuda:0', 'cuda:1', 'cuda:2')
    >>> ray_cuda_device([], "0")
    Traceback (most recent call last):
    ...
    RuntimeError: ray: the task holds no GPU (ray.get_gpu_ids() is empty): it needs num_gpus=1
    """
    return given_cuda_device("ray", gpu_ids, visible, "ray.get_gpu_ids() is empty): it needs "
                             "num_gpus=1")


def spark_cuda_device(addresses: Sequence[object], visible: str | None) -> str:
    """The torch device of the GPU Spark gave a task (``addresses``: its
    ``TaskContext.resources()["gpu"].addresses``, physical device indices; ``visible``: the
    executor's ``CUDA_VISIBLE_DEVICES``): the address's place among the visible devices, or the
    address itself where every device is visible.

    >>> spark_cuda_device(["1"], None), spark_cuda_device(["3"], "2,3")
    ('cuda:1', 'cuda:1')
    >>> spark_cuda_device([], None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: spark: the task holds no GPU (no "gpu" address): set spark.task.resource...
    """
    return given_cuda_device("spark", addresses, visible,
                             'no "gpu" address): set spark.task.resource.gpu.amount')


def given_cuda_device(engine: str, ids: Sequence[object], visible: str | None,
                      without: str) -> str:
    """The torch device of the first GPU an engine gave a task by its physical index (``ids``),
    read through the task's ``CUDA_VISIBLE_DEVICES`` (``visible``); ``without`` completes the
    error when it gave none."""
    if not ids:
        raise RuntimeError(f"{engine}: the task holds no GPU ({without}")
    mine = str(ids[0])
    seen = visible_cuda_devices(visible)
    if seen is None and mine.isdigit():
        return f"cuda:{mine}"
    if seen is None or mine not in seen:
        raise RuntimeError(f"{engine}: the task's GPU {mine} is not among its visible CUDA "
                           f"devices (CUDA_VISIBLE_DEVICES={visible!r})")
    return f"cuda:{seen.index(mine)}"


def runs_on_cuda(args: tuple) -> bool:
    """Whether a shard task's arguments hold a CUDA precision (``<band>@cuda...``).

    >>> from mixfold.precision import resolve_precision
    >>> runs_on_cuda((resolve_precision("float16@cuda"),)), runs_on_cuda((resolve_precision("dd"),))
    (True, False)
    """
    return any(_on_cuda(a) for a in args)


def on_cuda_device(args: tuple, device: str) -> tuple:
    """A shard task's arguments with every CUDA precision (``<band>@cuda``) moved to
    ``device``; everything else as it is.

    >>> from mixfold.precision import resolve_precision
    >>> moved = on_cuda_device(("x", resolve_precision("float32@cuda"), 4), "cuda:1")
    >>> moved[1], moved[1].device, moved[0], moved[2]
    ('float32@cuda:1', 'cuda:1', 'x', 4)
    >>> on_cuda_device((resolve_precision("float32"),), "cuda:1")[0].device is None
    True
    """
    return tuple(resolve_precision(f"{a.band}@{device}") if _on_cuda(a) else a for a in args)


def _on_cuda(value: object) -> bool:
    return isinstance(value, Precision) and (value.device or "").startswith("cuda")
