"""Analytic models the chapters plot and fit: Amdahl and Gustafson, occupancy, roofline...

Models have no GPU and no kernels: they take the hardware as an argument (an SM's limits, a GPU's figures, from
:mod:`labhelpers.gpus`) and never ask the device (``tests/test_models_have_no_gpu.py``).
"""
