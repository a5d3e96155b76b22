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

* ``ch11_link_rates``: pinned copies of 256 MiB each way and both ways at once, queued by the driver;
* ``ch11_pipeline_kernel_bound``: the pipeline with a kernel 1.25 x as long as the H2D copy;
* ``ch11_graphs``: 10 to 300 small kernels issued one by one against the same kernels replayed as one CUDA graph;
* ``ch11_events``: event queries and waits between streams, and a consumer without its wait;
* ``ch11_queues``: kernels running at once against the stream count for CUDA_DEVICE_MAX_CONNECTIONS = 1, 8, 32.

``bench(ctx)`` returns pinned H2D and D2H at 256 MiB against the link's theoretical maximum (target 80%)
and against pageable copies; the best pipeline against its slowest stage measured alone (ratio =
stage / pipeline, target >= 1/1.15 = 87%) for the kernel-bound job, and for the copy-bound job against
its floor, the two copies running at once; and the measured speedup over one stream against the model's
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
#: The kernel-bound job: the kernel takes this many times the H2D copy.
KERNEL_BOUND_SHARE = 1.25
_CACHE: dict = {}


def _get(name, fn):
    if name not in _CACHE:
        _CACHE[name] = fn()
    return _CACHE[name]


def _link():
    return _get("link", ex.link_table)


def _transfers():
    return _get("transfers", lambda: ex.transfer_table(repeat=5))


def _overhead_ms() -> float:
    fit = ex.fit_table(_transfers())
    pinned = fit[fit["host_memory"] == "pinned"]
    return float(pinned["latency_us"].mean()) * 1e-3  # per-operation cost: the link's latency


def _pipeline():
    return _get("pipeline", lambda: ex.pipeline_table(repeat=5, overhead_ms=_overhead_ms()))


def _kernel_bound():
    return _get("kernel_bound", lambda: ex.pipeline_table(
        repeat=5, overhead_ms=0.005, kernel_share=KERNEL_BOUND_SHARE, chunks=(1, 4, 8, 16, 32),
        streams=(1, 2, 3, 4), orders=("depth-first",), pageable=False))


def _graphs():
    return _get("graphs", lambda: ex.graph_table())


def _link_rates():
    return _get("link_rates", lambda: ex.link_rates_table(AT_BYTES, repeat=5))


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
        ("ch11_link_rates", _link_rates,
         "labhelpers.experiments.streams.link_rates_table: cuda.pinned_array uint8 buffers, copies queued by "
         "cuMemcpyHtoDAsync / cuMemcpyDtoHAsync on their own streams behind one CUDA event, median of 5 after one "
         "warm-up; gbps = bytes per direction (both directions' bytes for the last row) / time"),
        ("ch11_async", lambda: ex.async_table(),
         "host clock (time.perf_counter), medians of 5: returns_ms = the call returned, done_ms = the next "
         "synchronisation returned; copies of 2^26 float32 with stream=s; default-stream kernels: 1 block of 256 "
         "threads, 1000000 FMAs each; the error row ran in a separate process"),
        ("ch11_pipeline", _pipeline,
         "2^26 float32 (256 MiB each way), pinned host buffers; fma_chain calibrated to about 0.8 x the H2D time; "
         "issue = the copies queued by Numba (copy_to_device/copy_to_host) or by the driver (cuMemcpy*Async); "
         "wall_ms = host clock from the first call to the last stream synchronisation, median of 5 after one "
         "warm-up; stages alone = one whole-array H2D / kernel / D2H, CUDA events, copies queued by the driver; "
         "both_ms = H2D and D2H started together on two streams; model_ms = "
         "labhelpers.models.streams.pipeline_time with the stages alone, overhead_ms per operation (the fitted "
         "pinned latency); last row: the best configuration with pageable host buffers"),
        ("ch11_pipeline_kernel_bound", _kernel_bound,
         "as ch11_pipeline, with fma_chain calibrated to about 1.25 x the H2D time (the kernel is the slowest "
         "stage), depth-first issue only, overhead_ms = 0.005 in the model, no pageable row"),
        ("ch11_gantt", lambda: ex.gantt_table(iters=int(_pipeline()["iters"].iloc[0])),
         "CUDA events recorded on each operation's stream before and after it; ms after an event on the legacy "
         "default stream; 8 chunks of 2^26 float32, depth-first issue; one run after a warm-up"),
        ("ch11_managed", lambda: ex.managed_table(),
         "numba cuda.managed_array; kernel = fma_chain with 1 FMA in place; prefetch = "
         "cupy.cuda.runtime.memPrefetchAsync (or cuMemPrefetchAsync); to_host = into a NumPy buffer (D2H copy, or "
         "prefetch and/or NumPy reading managed memory); CUDA events for GPU work, host clock otherwise; "
         "medians of 3, fresh memory each time"),
        ("ch11_graphs", _graphs,
         "labhelpers.experiments.streams.graph_table: LaunchChain of 10 to 300 fma_chain launches (1 FMA, 4096 "
         "float32, 32 blocks of 128) on one non-blocking CuPy stream (Numba launches through cuda.external_stream), "
         "issued one by one or captured once (cupy Stream.begin_capture/end_capture) and replayed with "
         "Graph.launch; issue_us_per_op = lh.benchmark's issue_ms / launches, gpu_us_per_op = its median GPU time "
         "with the stream held / launches, wall_us_per_op = host clock from the first call to the stream's "
         "synchronisation / launches (median of 10); capture_ms = capture + instantiate, once; results checked"),
        ("ch11_events", lambda: ex.events_table(),
         "labhelpers.experiments.streams.events_table: timing_kernels.sleeper of 20 ms on s1, event recorded "
         "after it; host clock around event.query() and event.wait(stream=s2); consumer runs = "
         "kernels.streams.run_producer_consumer on 2^22 float32, 2000 FMAs, 20 runs each way"),
        ("ch11_queues", lambda: ex.queue_table(),
         "labhelpers.experiments.streams.queue_table: one process per CUDA_DEVICE_MAX_CONNECTIONS (1, 8, 32); on "
         "each of 1-32 streams 2 sleeper kernels (1 thread, about 10 ms) issued depth-first (and breadth-first "
         "for 8); wall_ms = host clock from the first launch to the last stream's synchronisation, median of 3; "
         "concurrency = streams x 2 x kernel alone / wall; model = labhelpers.models.streams.queue_concurrency"),
    ]
    from labhelpers.experiments import multi_gpu

    if multi_gpu.gpu_count() >= 2:
        steps.append(("ch11_multi_gpu", lambda: _get("multi_gpu", lambda: multi_gpu.multi_gpu_table((0, 1))),
                      "labhelpers.experiments.multi_gpu.multi_gpu_table on GPUs 0 and 1: cudaMemcpyPeerAsync of "
                      "256 MiB (CUDA events of the source GPU; both at once: host clock), and the 2^26 float32 "
                      "pipeline (16 chunks, 4 streams, driver's copies) whole on GPU 0, half on each alone, halves "
                      "on both at once; medians of 5 after one warm-up"))
    else:
        print("-- streams: ch11_multi_gpu NOT collected: this machine has one GPU")
    for name, fn, notes in steps:
        try:  # one failed table must not lose the others
            save_reference(name, fn(), out_dir, notes=notes)
        except Exception:
            traceback.print_exc()
            print(f"-- streams: {name} NOT collected (see the traceback above)")


def bench(ctx) -> list[Row]:
    """Pinned copies against the link maximum and against pageable copies; the pipelines against their stages."""
    rows: list[Row] = []
    link = _link().iloc[0]
    link_max = float(link["link_max_gbs"])
    rates = _link_rates().set_index("transfer")["gbps"]
    tr = _transfers()
    at = tr[tr["nbytes"] == AT_BYTES].set_index("transfer")["gbps"]
    for direction in ("H2D", "D2H"):
        pinned = float(rates[direction])
        rows.append(Row(TOPIC, f"{direction} pinned", "256 MiB", pinned, "GB/s",
                        f"PCIe gen{link['pcie_gen_max']} x{link['pcie_width_max']} theoretical", link_max,
                        target=0.80))
        rows.append(Row(TOPIC, f"{direction} pinned", "256 MiB", pinned, "GB/s", f"{direction} pageable",
                        float(at[f"{direction} pageable"])))
    rows.append(Row(TOPIC, "H2D + D2H at once", "2 x 256 MiB", float(rates["H2D + D2H at once"]), "GB/s",
                    "both directions' theoretical maximum", 2 * link_max))
    if "multi_gpu" in _CACHE:  # collected on a machine with two GPUs
        multi = _CACHE["multi_gpu"]
        peer = multi[multi["experiment"] == "peer copy"].set_index("case")
        split = multi[multi["experiment"] == "split job"].set_index("case")
        for case, row in peer.iterrows():
            rows.append(Row(TOPIC, f"peer copy {case}", "256 MiB", float(row["gbps"]), "GB/s",
                            f"H2D pinned (peer access: {bool(row['peer_access'])})", float(rates["H2D"])))
        rows.append(Row(TOPIC, "job split across 2 GPUs", "2^26 f32", float(split["speedup"].iloc[-1]), "x",
                        "2 (each GPU with its own link)", 2.0))
    if "graphs" in _CACHE:  # collected in this run
        g = ex.graph_summary(_CACHE["graphs"])
        # kernels per microsecond, so that the ratio is the graph's speedup over issuing one by one
        rows.append(Row(TOPIC, f"CUDA graph of {g['launches']} small kernels", "4096 f32", 1 / g["graph_wall_us"],
                        "kernels/us", "the same launches one by one (Numba), same run", 1 / g["wall_us"]))
    data_gb = 4 * int(_pipeline()["n"].iloc[0]) / 1e9
    for name, table, target in (("copy-bound", _pipeline(), None), ("kernel-bound", _kernel_bound(), 1 / 1.15)):
        summary = ex.pipeline_summary(table)
        best = (f"{summary['best_chunks']}x{summary['best_streams']} {summary['best_issue']}")
        # throughput of the job (bytes of input per second): ratio = slowest stage alone / pipeline wall time
        rows.append(Row(TOPIC, f"{name} pipeline ({best})", "2^26 f32", data_gb / (summary["best_ms"] * 1e-3),
                        "GB/s", f"slowest stage alone ({summary['stage_max_ms']:.2f} ms); wall/stage = "
                        f"{summary['ratio']:.3f}", data_gb / (summary["stage_max_ms"] * 1e-3), target=target))
        if name == "copy-bound":  # its floor: the two copies running at once share the link
            rows.append(Row(TOPIC, f"{name} pipeline ({best})", "2^26 f32", data_gb / (summary["best_ms"] * 1e-3),
                            "GB/s", f"H2D + D2H at once ({summary['both_ms']:.2f} ms); wall/both = "
                            f"{summary['both_ratio']:.3f}", data_gb / (summary["both_ms"] * 1e-3), target=1 / 1.15))
        else:
            rows.append(Row(TOPIC, f"{name} speedup over 1 stream", "2^26 f32", summary["speedup"], "x",
                            f"model's speedup for the same configuration ({summary['model_speedup']:.2f}x)",
                            summary["model_speedup"], target=0.85))
        print(f"-- streams, {name}: serial {summary['serial_ms']:.2f} ms, best {summary['best_ms']:.2f} ms ({best}, "
              f"{summary['best_order']}), slowest stage alone {summary['stage_max_ms']:.2f} ms, best/stage "
              f"{summary['ratio']:.3f}, both copies at once {summary['both_ms']:.2f} ms (best/both "
              f"{summary['both_ratio']:.3f}); speedup {summary['speedup']:.2f}x, model {summary['model_speedup']:.2f}x "
              f"(measured/model {summary['speedup'] / summary['model_speedup']:.2f})")
        numba = ex.numba_rows(table)
        nb = numba.loc[numba["wall_ms"].idxmin()]
        print(f"   best with Numba's copies: {nb['wall_ms']:.2f} ms ({int(nb['chunks'])} chunks, {int(nb['streams'])} "
              f"streams, {nb['order']})")
    return rows
