"""Probe (not committed): the GPU's gap between back-to-back kernels of one stream, and held vs ncu."""
import numpy as np
from numba import cuda
import labhelpers as lh
from labhelpers.kernels import stopwatch as sw

@cuda.jit
def empty(x):
    pass

x = cuda.device_array(1, np.float32)
for number in (1, 10, 100):
    t = lh.benchmark(lambda: empty[1, 32](x), number=number, repeat=30)
    print(f"empty kernel, number={number}: {t.median_ms*1e3:.2f} us per call ({t.clock})")
for n in (2**22, 2**24, 2**26):
    a = cuda.to_device(np.ones(n, np.float32)); b = cuda.device_array(n, np.float32)
    for number in (1, 5, 20):
        t = lh.benchmark(lambda: sw.copy[(n + 255) // 256, 256](a, b), number=number, repeat=30)
        print(f"copy 2^{int(np.log2(n))}, number={number}: {t.median_ms*1e3:.2f} us per call")
