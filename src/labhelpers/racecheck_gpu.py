"""On a GPU, :func:`labhelpers.racecheck.check_races` runs the same analysis in a simulator subprocess: the kernel is
rebuilt there from its source and the arrays travel as NumPy copies (split from ``racecheck.py``; see its docstring).
"""

from __future__ import annotations

import ast
import atexit
import builtins
import dis
import importlib
import inspect
import linecache
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
import threading
from typing import Any, Callable

import numpy as np
from numba import cuda

from . import backend, validate
from . import errors as _errors
from .errors import GPUOnlyError
from .racecheck_report import RaceReport

#: How the one-line notice of a long check starts (the subprocess route on a GPU passes such lines on).
NOTICE_PREFIX = "check_races:"
#: The simulator process of the subprocess route (on a GPU) is stopped after this long (a backstop).
CHILD_TIMEOUT_SECONDS = 900

_WHY_SIM = ("Check it under the simulator instead (restart the notebook or script with LABHELPERS_BACKEND=sim), "
            "or on the GPU with NVIDIA's race checker: compute-sanitizer --tool racecheck python your_script.py")


# ------------------------------------------------------------------------- on a GPU: a simulator subprocess


class _CannotRebuild(Exception):
    """The kernel cannot be rebuilt in a simulator process; the message says why."""


def _global_names(code) -> set[str]:
    names = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(ins.argval)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def _is_kernel_object(value: Any) -> bool:
    return getattr(value, "py_func", None) is not None and callable(getattr(value, "__getitem__", None))


def _encode(name: str, value: Any, seen: dict) -> tuple:
    if inspect.ismodule(value):
        return ("module", value.__name__)
    if _is_kernel_object(value):
        return ("kernel", _kernel_spec(value, seen))
    try:
        return ("value", pickle.dumps(value))
    except Exception as exc:  # noqa: BLE001  (any pickling failure means the same thing)
        raise _CannotRebuild(f"it uses the global {name!r}, a {type(value).__name__} that cannot be sent to "
                             f"another process ({type(exc).__name__})") from None


def _importable(py_func) -> bool:
    module = sys.modules.get(getattr(py_func, "__module__", None) or "")
    if module is None or module.__name__ == "__main__" or "<locals>" in py_func.__qualname__:
        return False
    if not getattr(module, "__file__", None):
        return False
    obj: Any = module
    for part in py_func.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return getattr(obj, "py_func", None) is py_func


def _module_alias(py_func) -> str | None:
    """The name under which ``py_func``'s module holds a kernel or device function built from it under another
    name (``interaction = cuda.jit(device=True)(body)``), or None. Importing it in the simulator process lets the
    module build it as it does under the simulator (a libdevice function, which the simulator lacks, becomes the
    module's Python fallback), instead of rebuilding its source with the GPU's globals."""
    module = sys.modules.get(getattr(py_func, "__module__", None) or "")
    if module is None or module.__name__ == "__main__" or "<locals>" in py_func.__qualname__:
        return None
    if not getattr(module, "__file__", None):
        return None
    for name, obj in vars(module).items():
        if getattr(obj, "py_func", None) is py_func:
            return name
    return None


def _kernel_spec(kernel: Any, seen: dict) -> dict:
    py_func = kernel.py_func
    if id(py_func) in seen:
        return seen[id(py_func)]
    device = getattr(kernel, "_device", None)
    if device is None:
        device = bool(getattr(kernel, "targetoptions", {}).get("device", False))
    if _importable(py_func):
        spec = {"how": "import", "module": py_func.__module__, "qualname": py_func.__qualname__}
        seen[id(py_func)] = spec
        return spec
    alias = _module_alias(py_func)
    if alias is not None:
        spec = {"how": "import", "module": py_func.__module__, "qualname": alias}
        seen[id(py_func)] = spec
        return spec
    try:
        lines, first = inspect.getsourcelines(py_func)
    except (OSError, TypeError) as exc:
        raise _CannotRebuild(f"its Python source is not available ({exc})") from None
    filename = py_func.__code__.co_filename
    spec = {"how": "source", "name": py_func.__name__, "source": textwrap.dedent("".join(lines)), "first": first,
            "filename": filename, "file_lines": linecache.getlines(filename), "device": bool(device), "values": {}}
    seen[id(py_func)] = spec
    values = {}
    glob = py_func.__globals__
    for name in sorted(_global_names(py_func.__code__)):
        if name in glob:
            values[name] = _encode(name, glob[name], seen)
    for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__ or ()):
        try:
            values[name] = _encode(name, cell.cell_contents, seen)
        except ValueError:  # an empty cell
            raise _CannotRebuild(f"its closure variable {name!r} is not set") from None
    spec["values"] = values
    return spec


def _host_copy(value: Any) -> Any:
    if isinstance(value, np.ndarray) or np.isscalar(value) or value is None:
        return value
    if hasattr(value, "copy_to_host"):
        return value.copy_to_host()
    if hasattr(value, "__cuda_array_interface__"):
        if hasattr(value, "get"):
            return value.get()

        return cuda.as_cuda_array(value).copy_to_host()
    return value


def _write_back(original: Any, written: np.ndarray | None) -> None:
    """Give an argument the contents the simulated launch left in its copy (as a launch would)."""
    if written is None or original is written:
        return
    try:
        if isinstance(original, np.ndarray):
            if original.flags.writeable:
                np.copyto(original, written)
        elif hasattr(original, "copy_to_device"):
            original.copy_to_device(np.ascontiguousarray(written))
        elif hasattr(original, "set") and hasattr(original, "__cuda_array_interface__"):
            original.set(written)
    except Exception:  # noqa: BLE001  (a view that cannot be written as a whole keeps its old contents)
        pass


def _rebuild(spec: dict, built: dict | None = None) -> Any:
    """In the simulator process: the kernel (or device function) a spec describes."""

    built = {} if built is None else built
    key = id(spec)
    if key in built:
        return built[key]
    if spec["how"] == "import":
        obj: Any = importlib.import_module(spec["module"])
        for part in spec["qualname"].split("."):
            obj = getattr(obj, part)
        built[key] = obj
        return obj
    filename = spec["filename"]
    if spec["file_lines"]:
        linecache.cache[filename] = (sum(map(len, spec["file_lines"])), None, spec["file_lines"], filename)
    namespace: dict = {"__name__": "labhelpers_racecheck_rebuilt", "__builtins__": builtins}
    for name, (how, payload) in spec["values"].items():
        if how == "module":
            namespace[name] = importlib.import_module(payload)
        elif how == "value":
            namespace[name] = pickle.loads(payload)
    tree = ast.parse("\n" * (spec["first"] - 1) + spec["source"], filename)
    fn_node = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    fn_node.decorator_list = []
    tree.body = [fn_node]
    exec(compile(tree, filename, "exec"), namespace)  # noqa: S102  (the user's own kernel source)
    kernel = cuda.jit(device=spec["device"])(namespace[spec["name"]])
    built[key] = kernel
    for name, (how, payload) in spec["values"].items():  # device functions last: they may refer back
        if how == "kernel":
            namespace[name] = _rebuild(payload, built)
    return kernel


def _run_in_subprocess(target, grid, block, args, shared_bytes: int, max_reported: int) -> RaceReport:
    name = target.py_func.__name__
    try:
        spec = _kernel_spec(target, {})
        payload = pickle.dumps({"spec": spec, "grid": grid, "block": block, "shared_bytes": shared_bytes,
                                "max_reported": max_reported, "args": [_host_copy(a) for a in args]})
    except _CannotRebuild as exc:
        raise GPUOnlyError(f"check_races cannot run {name} on a GPU: the race detector works in Numba's CUDA "
                           f"simulator, and {name} cannot be rebuilt there because {exc}. {_WHY_SIM}.") from None
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise GPUOnlyError(f"check_races cannot run {name} on a GPU: its arguments cannot be sent to the "
                           f"simulator process ({exc}). {_WHY_SIM}.") from None
    result = _child_process(payload, name)
    if result[0] == "ok":
        for original, written in zip(args, result[2]):
            _write_back(original, written)
        return result[1]
    if result[0] == "rebuild":
        raise GPUOnlyError(f"check_races cannot run {name} on a GPU: rebuilding it in the simulator failed "
                           f"({result[3]}). {_WHY_SIM}.")
    _raise_child_error(result, name)
    raise AssertionError("unreachable")  # _raise_child_error always raises


def check_in_simulator(check: Callable[..., Any], kernel: Any, *args: Any) -> bool:
    """On a GPU, run ``check(kernel, *args)`` once in the simulator (a subprocess) and raise what it raised there.

    A lab checker whose cases watch what a kernel does (a plain store next to an atomic, atomics per block, a
    ticket launched twice) can only watch it under the simulator. On a GPU it calls this first, so a student
    gets the simulator's verdict and message on both backends, then runs its GPU cases. ``check`` must be a
    module-level function of an importable module (it is imported by name in the subprocess); ``args`` must pickle.

    Returns:
        True if the check ran and passed; False if it could not run there (the kernel cannot be rebuilt), in which
        case the caller's own GPU cases decide. Under the simulator it does nothing and returns False.

    Raises:
        Whatever ``check`` raised in the simulator (a ``CheckFailed`` with its message).
    """
    if not backend.is_gpu():
        return False
    target = getattr(kernel, "dispatcher", kernel)  # a configured launch on a GPU
    validate.kernel(target, "kernel (the second argument of check_in_simulator)")
    try:
        spec = _kernel_spec(target, {})
        payload = pickle.dumps({"check": (check.__module__, check.__qualname__), "spec": spec,
                                "args": [_host_copy(a) for a in args]})
    except (_CannotRebuild, pickle.PicklingError, TypeError, AttributeError):
        return False
    result = _child_process(payload, target.py_func.__name__)
    if result[0] == "ok":
        return True
    if result[0] == "rebuild":
        return False
    _raise_child_error(result, target.py_func.__name__)
    return True


#: The line the simulator process prints when it has written a job's result (see :class:`_SimulatorProcess`).
DONE_LINE = "labhelpers-simulator-job-done"
#: A simulator process is replaced after this many jobs, so that what its jobs leave behind stays bounded.
JOBS_PER_PROCESS = 200


class _SimulatorProcess:
    """The one simulator process of this Python process, started on first use and kept for the next check.

    Starting Python with NumPy, Numba's simulator and the package takes seconds; a lab's check cell on a GPU checks
    several kernels, so each would wait that long again. Jobs go one at a time: the parent writes a job's payload to
    a file and its two paths on the process's stdin; the process writes the result file and prints
    :data:`DONE_LINE`. A process that dies, runs past :data:`CHILD_TIMEOUT_SECONDS`, is interrupted (Ctrl-C), or
    served :data:`JOBS_PER_PROCESS` jobs is replaced by a fresh one at the next job.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._key: tuple = ()
        self._jobs = 0
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._stderr: Any = None  # the process's stderr, a file in _tmp (read when it stops)

    @staticmethod
    def _environment() -> dict:
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return dict(os.environ, NUMBA_ENABLE_CUDASIM="1", LABHELPERS_BACKEND="sim",
                    PYTHONPATH=os.pathsep.join([package_root] + paths))

    def _start(self, env: dict) -> subprocess.Popen:
        self.stop()
        self._tmp = tempfile.TemporaryDirectory(prefix="labhelpers-sim-")
        self._stderr = open(os.path.join(self._tmp.name, "stderr.txt"), "w+")
        self._proc = subprocess.Popen([sys.executable, "-c", "from labhelpers.racecheck import _child_serve; "
                                       "_child_serve()"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, text=True, bufsize=1)
        self._key = self._key_of(env)
        self._jobs = 0
        return self._proc

    @staticmethod
    def _key_of(env: dict) -> tuple:
        """What a kept process was started with: another interpreter or environment needs a fresh one."""
        return sys.executable, tuple(sorted(env.items()))

    def stop(self) -> None:
        """End the process (at exit, or before a fresh one)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()  # type: ignore[union-attr]
                except OSError:
                    pass
        if self._tmp is not None:
            self._stderr.close()
            self._tmp.cleanup()
            self._tmp = None

    def run(self, payload: bytes, name: str) -> tuple:
        """Run :func:`_child_work` on ``payload`` in the simulator process; its result tuple."""
        with self._lock:
            env = self._environment()
            proc = self._proc
            if (proc is None or proc.poll() is not None or self._jobs >= JOBS_PER_PROCESS
                    or self._key != self._key_of(env)):
                proc = self._start(env)
            self._jobs += 1
            assert self._tmp is not None
            inp = os.path.join(self._tmp.name, f"in-{self._jobs}.pickle")
            out = os.path.join(self._tmp.name, f"out-{self._jobs}.pickle")
            with open(inp, "wb") as f:
                f.write(payload)
            stopped: list = []

            def stop() -> None:  # a backstop: MAX_RUN_SECONDS stops a long check first
                stopped.append(True)
                proc.kill()

            killer = threading.Timer(CHILD_TIMEOUT_SECONDS, stop)
            killer.daemon = True
            killer.start()
            done, code, stderr = False, None, ""
            try:
                proc.stdin.write(f"{inp}\t{out}\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
                for line in proc.stdout:  # type: ignore[union-attr]  # a long check's notice, passed on at once
                    if line.strip() == DONE_LINE:
                        done = True
                        break
                    if line.startswith(NOTICE_PREFIX):
                        print(line, end="", flush=True)
            except (BrokenPipeError, OSError):
                pass  # the process is gone: said below
            finally:
                killer.cancel()
                if not done:  # died, stopped, or interrupted here (Ctrl-C in a notebook): the process goes too
                    stderr = self._stderr_text()
                    code = proc.poll()
                    self.stop()
            if not done or not os.path.exists(out):
                if stopped:
                    limit = (f"{CHILD_TIMEOUT_SECONDS // 60} minutes" if CHILD_TIMEOUT_SECONDS >= 120
                             else f"{CHILD_TIMEOUT_SECONDS} seconds")
                    raise GPUOnlyError(f"the simulator process for {name} ran for more than {limit} and was stopped: check a smaller "
                                       f"launch (fewer blocks, a smaller input). {_WHY_SIM}.")
                raise GPUOnlyError(f"the simulator process for {name} stopped (exit code {code}): "
                                   f"{stderr.strip()[-1500:]} {_WHY_SIM}.")
            with open(out, "rb") as f:
                result = pickle.load(f)
            os.remove(inp)
            os.remove(out)
            return result

    def _stderr_text(self) -> str:
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            return self._stderr.read()
        except (OSError, ValueError):
            return ""

    @property
    def pid(self) -> int | None:
        """The process id of the running simulator process, or None (for tests)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None


_SIMULATOR = _SimulatorProcess()
atexit.register(_SIMULATOR.stop)


def _child_process(payload: bytes, name: str) -> tuple:
    """Run :func:`_child_work` on ``payload`` in the simulator process (kept between checks); its result tuple."""
    return _SIMULATOR.run(payload, name)


def _raise_child_error(result: tuple, name: str) -> None:
    """Re-raise, in this process, the exception the simulator process reported."""
    _, module, qualname, message = result
    cls = None
    if module == "builtins":
        cls = getattr(builtins, qualname, None)
    elif module.startswith("labhelpers"):
        cls = getattr(_errors, qualname, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        raise RuntimeError(f"{name} failed under the simulator: {qualname}: {message}")
    raise cls(message)


def _child_work(kernel: Any, payload: dict, detector: Callable[..., RaceReport]) -> tuple:  # pragma: no cover
    """What the simulator process does with the rebuilt kernel: a named check, or the race detector."""
    if "check" in payload:
        module, qualname = payload["check"]
        check: Any = importlib.import_module(module)
        for part in qualname.split("."):
            check = getattr(check, part)
        check(kernel, *payload["args"])
        return ("ok", None, [])
    report = detector(kernel, payload["grid"], payload["block"], *payload["args"],
                         shared_bytes=payload["shared_bytes"], max_reported=payload["max_reported"])
    written = [a if isinstance(a, np.ndarray) else None for a in payload["args"]]
    return ("ok", report, written)


def _serve_one(inp: str, out: str, detector: Callable[..., RaceReport]) -> None:  # pragma: no cover
    """One job of the simulator process: rebuild the kernel from the payload in ``inp``, run ``detector`` or the
    named check, write the result tuple to ``out``."""
    with open(inp, "rb") as f:
        payload = pickle.load(f)
    try:
        try:
            kernel = _rebuild(payload["spec"])
        except Exception as exc:  # noqa: BLE001
            result: tuple = ("rebuild", type(exc).__module__, type(exc).__qualname__, f"{type(exc).__name__}: {exc}")
        else:
            result = _child_work(kernel, payload, detector)
    except Exception as exc:  # noqa: BLE001  (passed back to the parent, which re-raises it)
        result = ("error", type(exc).__module__, type(exc).__qualname__, str(exc))
    with open(out, "wb") as f:
        pickle.dump(result, f)


def child_serve(detector: Callable[..., RaceReport]) -> None:  # pragma: no cover  (runs in the subprocess)
    """The simulator process of :class:`_SimulatorProcess`: for each line ``in-path<TAB>out-path`` on stdin, run one
    job (:func:`_serve_one`), then print :data:`DONE_LINE`. Ends when stdin closes (the parent is gone). ``detector``
    is ``racecheck.check_races``, passed in because racecheck imports this module."""
    for line in sys.stdin:
        if not line.strip():
            continue
        inp, out = line.rstrip("\n").split("\t")
        _serve_one(inp, out, detector)
        print(f"\n{DONE_LINE}", flush=True)
