"""Analytic models the chapters plot and fit: Amdahl and Gustafson, occupancy, roofline..."""
