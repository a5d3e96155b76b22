"""Chapter 14 on several GPUs: peer copies, issuing from one thread or many, NCCL collectives, split Jacobi, n-body.

``collect(out_dir)`` stores, for 2 and for 4 GPUs where the machine has them (``devices=(0, 1)`` and
``(0, 1, 2, 3)``), the tables of :data:`labhelpers.experiments.multi_gpu.REFERENCE_TABLES` as
``ch14_<table>_<g>gpu``. It needs every GPU of the machine in one process: run it with
``bash tools/device_collect_multi.sh`` (not through the one-GPU lanes of tools/device_collect.sh).

``bench(ctx)`` compares, in the same run: peer copies with NVLink's peak per direction (``nvidia-smi nvlink -s``,
target 0.85); the split job on 2 GPUs with the whole job on one (target 1.8x); Jacobi's weak-scaling
efficiency on 2 and 4 GPUs (target 0.90); NCCL's all-reduce bus bandwidth at 1 GiB with the peer-copy rate
(target 0.80).
"""

from __future__ import annotations

import traceback

import pandas as pd

from common import Row

from labhelpers.experiments import multi_gpu as mg
from labhelpers.refdata import current_meta, save_reference

TOPIC = "multi_gpu"
_CACHE: dict[tuple[str, int], pd.DataFrame] = {}

NOTES = {
    "topology": "cuDeviceCanAccessPeer for every ordered pair; link = nvidia-smi topo -m; nvlink_peak_gbs = the "
                "link speeds of nvidia-smi nvlink -s of GPU a, summed (one direction)",
    "peer_copies": "cudaMemcpyPeerAsync of 256 MiB for every pair, each way (CUDA events of the source GPU) and "
                   "both ways at once (host clock); peer access enabled; medians of 5 after one warm-up",
    "issue": "chapter 11's pipeline (2^26 float32, 16 chunks, 4 streams, driver's copies, fma_chain calibrated to "
             "0.8 x H2D) whole on GPU 0, one share alone on each GPU, all shares from one host thread (GPU after "
             "GPU) and from one Python thread per GPU; host clock; medians of 5 after one warm-up",
    "collectives": "cupy.cuda.nccl, ncclCommInitAll in one process, group calls from one thread, float32 (sum); "
                   "nbytes = nccl-tests' size S; 20 calls (5 above 16 MiB) between CUDA events on every GPU's "
                   "stream, slowest GPU, median of 5; busbw with nccl-tests' factors",
    "jacobi_scaling": "labhelpers.kernels.multi_gpu.SplitJacobi, 16384 x 16384 per GPU (weak) or in all (strong), "
                      "block (32, 8), 50 steps after 2, host clock; overlap = edges first, sent on a copy stream "
                      "while the interior is computed",
    "nbody_scaling": "2^17 bodies, nbody_slice (IEEE division and sqrt) on n/g bodies per GPU against all, then "
                     "an in-place NCCL all-gather of the positions; median of 5 steps after one warm-up",
}


def _table(name: str, gpus: int) -> pd.DataFrame:
    """The table ``name`` measured on GPUs 0..gpus-1, once per run."""
    key = (name, gpus)
    if key not in _CACHE:
        devices = tuple(range(gpus))
        fn = {"topology": mg.topology_table, "peer_copies": mg.peer_copy_pairs, "issue": mg.issue_table,
              "collectives": mg.collectives_table, "jacobi_scaling": mg.jacobi_scaling_table,
              "nbody_scaling": mg.nbody_scaling_table}[name]
        _CACHE[key] = fn(devices)
    return _CACHE[key]


def _counts() -> list[int]:
    return [g for g in mg.REFERENCE_GPUS if g <= mg.gpu_count()]


def collect(out_dir) -> None:
    """Measure and store every chapter 14 table for 2 and 4 GPUs (where present)."""
    counts = _counts()
    if not counts:
        print(f"-- multi_gpu: NOT collected: this process sees {mg.gpu_count()} GPU(s); run "
              "tools/device_collect_multi.sh on a machine with 2 or 4")
        return
    for g in counts:
        meta = dict(current_meta(), gpu_count=g)
        for name in mg.REFERENCE_TABLES:
            try:  # one failed table must not lose the others
                save_reference(mg.reference_name(name, g), _table(name, g), out_dir, meta=meta, notes=NOTES[name])
                print(f"-- multi_gpu: {mg.reference_name(name, g)} collected", flush=True)
            except Exception:
                traceback.print_exc()
                print(f"-- multi_gpu: {mg.reference_name(name, g)} NOT collected (see the traceback above)")


def bench(ctx) -> list[Row]:
    """The issue's four targets, each against a rate measured in the same run."""
    rows: list[Row] = []
    counts = _counts()
    if not counts:
        print("-- multi_gpu: bench skipped: fewer than two GPUs")
        return rows
    topo = _table("topology", 2)
    peak = float(topo["nvlink_peak_gbs"].iloc[0])
    link = str(topo["link"].iloc[0])
    peer = _table("peer_copies", 2)
    one_way = peer[~peer["case"].str.startswith("both")]
    for _, r in one_way.iterrows():
        rows.append(Row(TOPIC, f"peer copy {r['case']}", "256 MiB", float(r["gbps"]), "GB/s",
                        f"NVLink peak per direction ({link}, nvidia-smi nvlink -s)", peak, target=0.85))
    issue = _table("issue", 2).set_index("case")
    for case in ("all shares, one thread", "all shares, a thread per GPU"):
        rows.append(Row(TOPIC, f"split job, 2 GPUs: {case}", "2^26 f32", float(issue.loc[case, "speedup"]), "x",
                        "the whole job on one GPU (1x)", 1.0, target=1.8))
    for g in counts:
        jac = _table("jacobi_scaling", g)
        weak = jac[(jac["mode"] == "weak") & jac["overlap"] & (jac["gpus"] == g)]
        rows.append(Row(TOPIC, f"Jacobi weak scaling, {g} GPUs, overlap", "16384^2/GPU",
                        float(weak["efficiency"].iloc[0]), "eff", "perfect weak scaling (1.0)", 1.0, target=0.90))
        coll = _table("collectives", g)
        big = coll[(coll["collective"] == "all_reduce")].sort_values("nbytes").iloc[-1]
        rows.append(Row(TOPIC, f"NCCL all-reduce busbw, {g} GPUs", f"{int(big['nbytes']) >> 20} MiB",
                        float(big["busbw_gbs"]), "GB/s", "peer copy GPU 0 -> GPU 1, same run",
                        float(one_way["gbps"].iloc[0]), target=0.80))
    return rows
