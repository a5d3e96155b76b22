"""Chapter 11 (streams and the host-device link) on the GPU: reference tables and the bench rows.

``collect(out_dir)`` writes

* ``ch11_link``: the host link as the driver reports it (PCIe generation and width, copy engines) and its
  theoretical bandwidth per direction;
* ``ch11_transfers``: H2D and D2H from 4 B to 1 GiB, pageable and pinned;
* ``ch11_async``: when calls return against when their work is done; the legacy default stream; an
  error surfacing at the next synchronisation;
* ``ch11_pipeline``: the chunked pipeline on 2^26 float32 over chunks, streams and issue orders, beside
  each stage measured alone and the model's prediction;
* ``ch11_gantt``: CUDA events around every operation of 8 chunks on 1, 2, 4 and 8 streams;
* ``ch11_managed``: unified memory (host or device first touch, with and without prefetch) against
  explicit copies.

``bench(ctx)`` returns pinned H2D and D2H at 256 MiB against the link's theoretical maximum (target 80%)
and against pageable copies; the best pipeline against its slowest stage measured alone (ratio =
stage / pipeline, target >= 1/1.15 = 87%); and the measured speedup over one stream against the model's
(within 15%).

Run: ``python bench/run_all.py --only streams [--collect src/labhelpers/data/reference]``.
"""

from __future__ import annotations

import traceback

from common import Row, lh  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers.experiments import streams as ex
from labhelpers.refdata import save_reference

TOPIC = "streams"
AT_BYTES = 2**28
_CACHE: dict = {}


def _get(name, fn):
    if name not in _CACHE:
        _CACHE[name] = fn()
    return _CACHE[name]


def _link():
    return _get("link", ex.link_table)


def _transfers():
    return _get("transfers", lambda: ex.transfer_table(repeat=5))


def _pipeline():
    def measure():
        fit = ex.fit_table(_transfers())
        pinned = fit[fit["host_memory"] == "pinned"]
        overhead_ms = float(pinned["latency_us"].mean()) * 1e-3  # per-operation cost: the link's latency
        return ex.pipeline_table(repeat=5, overhead_ms=overhead_ms)

    return _get("pipeline", measure)


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (names prefixed ch11_)."""
    save_reference("ch11_link", _link(), out_dir,
                   notes="nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
                         "pcie.link.width.max (current read while 2 GiB of pinned H2D copies ran); link_max_gbs = "
                         "rate per lane x lanes x line code / 8 for the maximum generation and width; device "
                         "attributes ASYNC_ENGINE_COUNT, CONCURRENT_KERNELS, CONCURRENT_MANAGED_ACCESS")
    save_reference("ch11_transfers", _transfers(), out_dir,
                   notes="labhelpers.experiments.memory.transfer_sweep: copy_to_device / copy_to_host of uint8 "
                         "buffers, CUDA events, median of 5 after 2 warm-ups; pinned = cuda.pinned_array, pageable = "
                         "a filled NumPy array")
    steps = [
        ("ch11_async", lambda: ex.async_table(),
         "host clock (time.perf_counter), medians of 5: returns_ms = the call returned, done_ms = the next "
         "synchronisation returned; copies of 2^26 float32 with stream=s; default-stream kernels: 1 block of 256 "
         "threads, 1000000 FMAs each; the error row ran in a separate process"),
        ("ch11_pipeline", _pipeline,
         "2^26 float32 (256 MiB each way), pinned host buffers; fma_chain calibrated to about 0.8 x the H2D time; "
         "wall_ms = host clock from the first call to the last stream synchronisation, median of 5 after one "
         "warm-up; stages alone = one whole-array H2D / kernel / D2H, CUDA events; model_ms = "
         "labhelpers.models.streams.pipeline_time with the stages alone, overhead_ms per operation (the fitted "
         "pinned latency); last row: the best configuration with pageable host buffers"),
        ("ch11_gantt", lambda: ex.gantt_table(iters=int(_pipeline()["iters"].iloc[0])),
         "CUDA events recorded on each operation's stream before and after it; ms after an event on the legacy "
         "default stream; 8 chunks of 2^26 float32, depth-first issue; one run after a warm-up"),
        ("ch11_managed", lambda: ex.managed_table(),
         "numba cuda.managed_array; kernel = fma_chain with 1 FMA in place; prefetch = "
         "cupy.cuda.runtime.memPrefetchAsync (or cuMemPrefetchAsync); to_host = into a NumPy buffer (D2H copy, or "
         "prefetch and/or NumPy reading managed memory); CUDA events for GPU work, host clock otherwise; "
         "medians of 3, fresh memory each time"),
    ]
    for name, fn, notes in steps:
        try:  # one failed table must not lose the others
            save_reference(name, fn(), out_dir, notes=notes)
        except Exception:
            traceback.print_exc()
            print(f"-- streams: {name} NOT collected (see the traceback above)")


def bench(ctx) -> list[Row]:
    """Pinned copies against the link maximum and against pageable copies; the pipeline against its stages."""
    rows: list[Row] = []
    link = _link().iloc[0]
    link_max = float(link["link_max_gbs"])
    tr = _transfers()
    at = tr[tr["nbytes"] == AT_BYTES].set_index("transfer")["gbps"]
    for direction in ("H2D", "D2H"):
        pinned, pageable = float(at[f"{direction} pinned"]), float(at[f"{direction} pageable"])
        rows.append(Row(TOPIC, f"{direction} pinned", "256 MiB", pinned, "GB/s",
                        f"PCIe gen{link['pcie_gen_max']} x{link['pcie_width_max']} theoretical", link_max,
                        target=0.80))
        rows.append(Row(TOPIC, f"{direction} pinned", "256 MiB", pinned, "GB/s", f"{direction} pageable", pageable))
    summary = ex.pipeline_summary(_pipeline())
    data_gb = 4 * int(_pipeline()["n"].iloc[0]) / 1e9
    best = f"{summary['best_chunks']} chunks/{summary['best_streams']} streams {summary['best_order']}"
    # throughput of the job (bytes of input per second): ratio = slowest stage alone / pipeline wall time
    rows.append(Row(TOPIC, f"pipeline best ({best})", "2^26 f32", data_gb / (summary["best_ms"] * 1e-3), "GB/s",
                    f"slowest stage alone ({summary['stage_max_ms']:.2f} ms); wall/stage = {summary['ratio']:.3f}",
                    data_gb / (summary["stage_max_ms"] * 1e-3), target=1 / 1.15))
    rows.append(Row(TOPIC, "pipeline speedup over 1 stream", "2^26 f32", summary["speedup"], "x",
                    f"model's speedup for the same configuration ({summary['model_speedup']:.2f}x)",
                    summary["model_speedup"], target=0.85))
    rows.append(Row(TOPIC, "pipeline 1 chunk, 1 stream", "2^26 f32", data_gb / (summary["serial_ms"] * 1e-3), "GB/s",
                    "slowest stage alone", data_gb / (summary["stage_max_ms"] * 1e-3)))
    print(f"-- streams: serial {summary['serial_ms']:.2f} ms, best {summary['best_ms']:.2f} ms ({best}), slowest "
          f"stage alone {summary['stage_max_ms']:.2f} ms, best/stage {summary['ratio']:.3f} (target <= 1.15); "
          f"speedup {summary['speedup']:.2f}x, model {summary['model_speedup']:.2f}x "
          f"(measured/model {summary['speedup'] / summary['model_speedup']:.2f}, target 0.85-1.15)")
    return rows
