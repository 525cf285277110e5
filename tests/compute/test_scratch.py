"""compute/scratch.py: per-thread buffers reused by name, never shared across names, dtypes or
threads."""

import threading

import numpy as np

from mixfold.compute.scratch import scratch


def test_a_buffer_has_the_shape_and_dtype_asked_and_is_c_contiguous():
    for shape, dtype in [((3, 4), np.float64), ((2, 0, 5), np.float32), ((), np.int64),
                         ((7,), np.uint16)]:
        a = scratch("test.shape", shape, dtype)
        assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous


def test_one_name_reuses_its_memory_and_grows_when_asked_for_more():
    a = scratch("test.grow", (4, 4))
    b = scratch("test.grow", (2, 8))
    assert np.shares_memory(a, b)
    c = scratch("test.grow", (100, 100))  # larger: a new buffer, then reused
    assert not np.shares_memory(a, c) and np.shares_memory(c, scratch("test.grow", (5,)))


def test_names_and_dtypes_do_not_share():
    a = scratch("test.one", (8,))
    b = scratch("test.two", (8,))
    c = scratch("test.one", (8,), np.float32)
    a[:] = 1.0
    b[:] = 2.0
    c[:] = 3.0
    assert a.tolist() == [1.0] * 8 and b.tolist() == [2.0] * 8


def test_threads_never_share_a_buffer():
    start = threading.Barrier(4)
    seen, errors = [], []

    def work(i):
        buf = scratch("test.thread", (1000,))
        start.wait()
        buf[:] = i
        start.wait()  # every thread has written before any reads
        if not (buf == i).all():
            errors.append(i)
        seen.append(buf)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert not any(np.shares_memory(a, b) for i, a in enumerate(seen) for b in seen[i + 1:])
