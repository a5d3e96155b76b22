"""Check the compiled kernels (resources.json) at the recorded launches (launches.json) on each student GPU.

    PYTHONPATH=$PWD/src python tools/compile_check/check.py    # writes tools/compile_check/report.md

Limits come from ``labhelpers.gpus.STUDENT_GPUS`` (the CUDA C++ Programming Guide's table per compute
capability, allocation units from the CUDA Occupancy Calculator); ``occupancy.occupancy`` applies them.
"""

from __future__ import annotations

import json
from pathlib import Path

from labhelpers.errors import LaunchConfigError
from labhelpers import gpus
from labhelpers.models import occupancy as occ

HERE = Path(__file__).resolve().parent
MANIFEST, RESOURCES, REPORT = HERE / "launches.json", HERE / "resources.json", HERE / "report.md"


def arch_name(cc: tuple[int, int]) -> str:
    """``sm_75`` for (7, 5)."""
    return f"sm_{cc[0]}{cc[1]}"


def rows(manifest: dict, resources: dict) -> list[dict]:
    """One row per kernel, signature, launch and architecture: resources, blocks per SM, and the problem if any."""
    out = []
    for path, entry in manifest.items():
        for signature in entry["signatures"]:
            for cc, sm in gpus.STUDENT_GPUS.items():
                key = f"{path}|{','.join(signature)}|{arch_name(cc)}"
                res = resources.get(key)
                for launch in entry["launches"]:
                    row = {"kernel": path, "signature": ", ".join(signature), "arch": arch_name(cc), "gpu": sm.name,
                           "threads": launch["threads"], "dynamic_shared": launch["dynamic_shared"]}
                    if res is None or "error" in res:
                        row["problem"] = ("not compiled (run tools/compile_check/compile_kernels.py)" if res is None
                                          else f"does not compile: {res['error']}")
                        out.append(row)
                        continue
                    row.update(registers=res["registers"], static_shared=res["static_shared"],
                               spills=res["spill_stores"] + res["spill_loads"])
                    shared = res["static_shared"] + launch["dynamic_shared"]
                    try:
                        o = occ.occupancy(launch["threads"], res["registers"], shared, sm, opt_in=True)
                        row["blocks_per_sm"], row["limiting"] = o.blocks_per_sm, " and ".join(o.limiting)
                        if o.blocks_per_sm < 1:
                            row["problem"] = (f"0 blocks per SM: {launch['threads']} threads x {res['registers']} "
                                              f"registers and {shared:,} B shared do not fit one SM "
                                              f"(limited by {row['limiting']})")
                    except LaunchConfigError as exc:
                        row["problem"] = str(exc)
                    out.append(row)
    return out


def problems(table: list[dict]) -> list[str]:
    """Each launch that would fail, as 'kernel on arch (GPU), N threads: what limit'."""
    return [f"{r['kernel']} ({r['signature']}) on {r['arch']} ({r['gpu']}), {r['threads']} threads, "
            f"{r['dynamic_shared']:,} B dynamic shared: {r['problem']}" for r in table if r.get("problem")]


def worst_on(table: list[dict], arch: str = "sm_75", top: int = 5) -> list[dict]:
    """The kernels with the fewest resident warps per SM at the book's launches on ``arch`` (then most registers)."""
    by_kernel: dict[str, dict] = {}
    for r in table:
        if r["arch"] != arch or "blocks_per_sm" not in r:
            continue
        warps = r["blocks_per_sm"] * -(-r["threads"] // 32)
        key = r["kernel"]
        if key not in by_kernel or (warps, -r["registers"]) < by_kernel[key]["_rank"]:
            by_kernel[key] = {**r, "warps_per_sm": warps, "_rank": (warps, -r["registers"])}
    return sorted(by_kernel.values(), key=lambda r: (r["_rank"], -r["spills"]))[:top]


def report(table: list[dict]) -> str:
    """The Markdown table: kernel x architecture, registers, static shared, spills, blocks per SM at each launch."""
    lines = ["# Kernels on the GPUs students get", "",
             "Written by `tools/compile_check/check.py` from `resources.json` (registers, static shared memory and "
             "spill bytes from `ptxas -v` of the CUDA 12 wheel) and `launches.json` (the launches the tests make). "
             "Blocks/SM: resident blocks at that launch (`labhelpers.models.occupancy`).", "",
             "| kernel | arch | regs | static shared (B) | spills (B) | threads | dyn. shared (B) | blocks/SM | limit |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in table:
        name = r["kernel"].replace("labhelpers.kernels.", "")
        if r.get("problem"):
            lines.append(f"| {name} | {r['arch']} | | | | {r['threads']} | {r['dynamic_shared']} | FAILS | "
                         f"{r['problem'][:120]} |")
            continue
        lines.append(f"| {name} | {r['arch']} | {r['registers']} | {r['static_shared']} | {r['spills']} | "
                     f"{r['threads']} | {r['dynamic_shared']} | {r['blocks_per_sm']} | {r['limiting']} |")
    lines += ["", "## Fewest resident warps per SM on sm_75 (T4)", "",
              "| kernel | regs | static shared (B) | spills (B) | threads | blocks/SM | warps/SM of 32 | limit |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in worst_on(table):
        lines.append(f"| {r['kernel'].replace('labhelpers.kernels.', '')} | {r['registers']} | {r['static_shared']} | "
                     f"{r['spills']} | {r['threads']} | {r['blocks_per_sm']} | {r['warps_per_sm']} | {r['limiting']} |")
    return "\n".join(lines) + "\n"


def load() -> list[dict]:
    """The table from the committed manifest and compiled results."""
    return rows(json.loads(MANIFEST.read_text()), json.loads(RESOURCES.read_text()))


if __name__ == "__main__":
    table = load()
    REPORT.write_text(report(table))
    print(f"{len(table)} rows, {len(problems(table))} problems; wrote {REPORT}")
