"""Reference kernels, one module per chapter. Each is tested against NumPy under the simulator."""
