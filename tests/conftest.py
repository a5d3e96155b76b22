"""Test configuration: the package tests run under Numba's CUDA simulator unless told otherwise."""

import os

os.environ.setdefault("LABHELPERS_BACKEND", "sim")
os.environ.setdefault("MPLBACKEND", "Agg")
