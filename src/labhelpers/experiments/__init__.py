"""Measurement sweeps and table builders, one module per chapter.

``labhelpers.kernels.<topic>`` holds what a chapter shows (kernels, device functions, the host
wrappers that launch them, NumPy specifications, byte and flop counts); the modules here time
those kernels over a grid of sizes or launches and build the tables the chapter plots and
``bench/<topic>.py`` stores as reference data. Their figures live in :mod:`labhelpers.figures`.
"""
