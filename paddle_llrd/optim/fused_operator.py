"""The fused CPU operator: built once per machine and Paddle, loaded once per process.

``csrc/`` holds four Paddle custom operators (``PD_BUILD_OP``):
``paddle_llrd_fused_adamw`` (``fused_adamw.cc``), the update of a whole
:class:`~paddle_llrd.optim.multi_tensor.FlatLayout` (clip, decay, Adam step,
beta powers) in one pass over memory on a pool of threads of its own;
``paddle_llrd_ema_update`` (``ema_update.cc``), the EMA's update in one pass, on
the same pool (``thread_pool.h``); ``paddle_llrd_squared_norms``
(``squared_norms.cc``), the gradients' squared norms and their sum, which a
clip computes before the update; and ``paddle_llrd_zero_fill``
(``zero_gradients.cc``), ``clear_grad``'s zeroing of large gradients with
streaming stores (:mod:`~paddle_llrd.optim.gradient_clearing`). All compute every
value as Paddle's own CPU kernels do, so the bits are theirs.

They are built with ``paddle.utils.cpp_extension`` as one translation unit
(``operators.cc``, so that Paddle's headers are compiled once), in a child
process (its output kept out of the user's), the first time they are wanted, or by
``make install`` (:func:`build`), and cached under
``~/.cache/paddle_llrd/operators`` (``PADDLE_LLRD_OPERATOR_DIR`` moves it),
in a folder named after everything the build depends on (the sources, the
flags, Paddle's and Python's versions, the CPU, the compiler). Loading checks the operators
against Paddle's kernels on a small problem; where the build or that check
fails (no C++ compiler, ``CXX`` pointing at one that fails, another
platform), :func:`unavailable_reason` says why, a
:class:`~paddle_llrd.FusedOperatorWarning` says it once, and the callers run
Paddle's kernels instead, with the same numbers. ``PADDLE_LLRD_FUSED=0``
turns the operators off. The squared norms are checked on their own, at their
first use (:func:`norms_unavailable_reason`): where they differ, the clip
takes Paddle's kernels and the update still runs the fused operator.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from array import array
from pathlib import Path
from typing import Any, Iterator

import paddle

from ..warning_classes import FusedOperatorWarning, stacklevel_outside_package
from .fused_check import norms_mismatch, operator_mismatch

__all__ = [
    "DISABLE_ENV", "OPERATOR_DIR_ENV", "build", "cache_directory", "cpu_info", "doubles_as_ints", "ema_update",
    "fused_adamw", "norms_unavailable_reason", "squared_norms", "unavailable_reason", "warn_unavailable",
    "zero_gradients",
]

DISABLE_ENV = "PADDLE_LLRD_FUSED"
OPERATOR_DIR_ENV = "PADDLE_LLRD_OPERATOR_DIR"
CSRC = Path(__file__).resolve().parent / "csrc"
# operators.cc includes the operators' files: one translation unit (Paddle's headers compiled once).
SOURCE = CSRC / "operators.cc"
LIBRARY = "paddle_llrd_ops"
ADAMW_OP = "paddle_llrd_fused_adamw"
EMA_OP = "paddle_llrd_ema_update"
NORMS_OP = "paddle_llrd_squared_norms"
ZERO_OP = "paddle_llrd_zero_fill"
# -ffp-contract=off: no multiply-add fused that Paddle's kernels do not fuse;
# -fno-math-errno: sqrt without errno, so that the loops vectorise; -mno-f16c: the
# float16 conversion of Paddle's headers in software, as Paddle's x86 wheels build it
# (with F16C the header takes the instruction, which rounds otherwise than Paddle 3.0).
FLAGS = ["-O3", "-march=native", "-mno-f16c", "-fno-math-errno", "-ffp-contract=off", "-pthread"]

_lock = threading.Lock()
_state: dict[str, Any] = {"loaded": False, "reason": None, "warned": False, "norms_checked": False,
                          "norms_reason": None}


def doubles_as_ints(values: list[float]) -> list[int]:
    """``values`` as the int64s holding their IEEE bits (the operators' ``scalars`` attribute).

    Examples:
        >>> doubles_as_ints([1.0])
        [4607182418800017408]
    """
    return array("q", array("d", values).tobytes()).tolist()


def cache_directory() -> Path:
    """Where built operators are kept: ``PADDLE_LLRD_OPERATOR_DIR``, else ``~/.cache/paddle_llrd/operators``."""
    given = os.environ.get(OPERATOR_DIR_ENV)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "paddle_llrd" / "operators"


def _compiler() -> str:
    return os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or "c++"


def cpu_info() -> dict[str, str]:
    """The first CPU's fields in Linux's ``/proc/cpuinfo`` (``model name``, ``flags``, ...);
    empty where there is none. Its flags say, among others, whether the CPU has AVX-512F, which
    decides the arithmetic of Paddle's CPU AdamW and so of the fused operator."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if not line.strip():
                    break  # (the first CPU's fields end at the first blank line)
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def _cpu_signature() -> str:
    """The CPU the build is for (``-march=native``): its flags where Linux lists them."""
    fields = cpu_info()
    return fields.get("flags") or fields.get("Features") or platform.processor() or platform.machine()


def _build_key() -> str:
    digest = hashlib.sha256()
    sources = sorted(path for path in CSRC.iterdir() if path.suffix in (".cc", ".h"))
    for part in (*(path.read_bytes() for path in sources), " ".join(FLAGS).encode(), paddle.__version__.encode(),
                 str(getattr(paddle.version, "commit", "")).encode(), sys.version.encode(), platform.platform().encode(),
                 _cpu_signature().encode(), _compiler().encode()):
        digest.update(part)
        digest.update(b"\0")
    return digest.hexdigest()[:20]


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (processes building at once wait for the first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # (Windows: no lock; the rename below keeps the library whole)
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_BUILD_SCRIPT = """
import sys
from paddle.utils.cpp_extension import load
load(sys.argv[1], [sys.argv[2]], extra_cxx_cflags=sys.argv[4].split(), extra_ldflags=["-pthread"],
     build_directory=sys.argv[3], verbose=False)
"""


def _compile(target: Path) -> None:
    """Build the library into ``target`` with ``paddle.utils.cpp_extension`` (in a child process)."""
    compiler = _compiler()
    try:
        subprocess.run([compiler, "--version"], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        why = f"exit status {error.returncode}" if isinstance(error, subprocess.CalledProcessError) else str(error)
        raise RuntimeError(f"no working C++ compiler (`{compiler} --version`: {why})") from None
    print(f"paddle_llrd: building the fused AdamW operator with {compiler} (once per machine and Paddle) ...",
          file=sys.stderr, flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as build_directory:
        done = subprocess.run(
            [sys.executable, "-c", _BUILD_SCRIPT, LIBRARY, str(SOURCE), build_directory, " ".join(FLAGS)],
            capture_output=True, text=True, env=dict(os.environ, CC=compiler, CXX=compiler), timeout=900,
        )
        built = Path(build_directory) / LIBRARY / f"{LIBRARY}.so"
        if done.returncode != 0 or not built.exists():
            output = (done.stdout + done.stderr).strip().splitlines()
            errors = [line for line in output if "error" in line.lower()]
            raise RuntimeError(f"the build with {compiler} failed: {(errors or output or ['(no output)'])[0].strip()}")
        shutil.move(str(built), str(target.with_suffix(".tmp")))
        os.replace(target.with_suffix(".tmp"), target)


def _library() -> Path:
    """The built library for this machine, building it first if need be."""
    library = cache_directory() / _build_key() / f"{LIBRARY}.so"
    if not library.exists():
        with _file_lock(cache_directory() / f"{_build_key()}.lock"):
            if not library.exists():
                _compile(library)
    return library


def _register(library: Path) -> None:
    with warnings.catch_warnings():  # (its import warns that ccache, a build tool, is missing: no build here)
        warnings.simplefilter("ignore")
        from paddle.utils.cpp_extension.extension_utils import load_op_meta_info_and_register_op
    load_op_meta_info_and_register_op(str(library))


def _load() -> str | None:
    """Load the operators into this process (once); the reason they cannot serve, or None."""
    if os.environ.get(DISABLE_ENV, "").strip() == "0":
        return f"{DISABLE_ENV}=0"
    if not hasattr(paddle._C_ops, "_run_custom_op"):
        return "this Paddle cannot run custom operators"
    try:
        _register(_library())
    except Exception as error:  # (any failure to build or load leaves Paddle's kernels in charge)
        return f"the fused operator is not built: {error}"
    try:
        mismatch = operator_mismatch(fused_adamw, ema_update)  # (the operators just loaded)
    except Exception as error:  # (an operator that cannot run its check does not serve)
        mismatch = f"its check failed: {type(error).__name__}: {error}"
    if mismatch is not None:
        return f"the fused operator's numbers differ from Paddle's kernels on this machine ({mismatch})"
    return None


def unavailable_reason() -> str | None:
    """Why the fused operators cannot serve this process (None: they can). Loads them at the first call."""
    if not _state["loaded"]:
        with _lock:
            if not _state["loaded"]:
                _state["reason"] = _load()
                _state["loaded"] = True
    return _state["reason"]


def norms_unavailable_reason() -> str | None:
    """Why ``paddle_llrd_squared_norms`` cannot serve this process (None: it can): the
    library's own reason, or a difference from Paddle's kernels found at its first use."""
    reason = unavailable_reason()
    if reason is not None:
        return reason
    if not _state["norms_checked"]:
        with _lock:
            if not _state["norms_checked"]:
                try:
                    with paddle.no_grad():
                        mismatch = norms_mismatch(squared_norms)
                except Exception as error:  # (an operator that cannot run its check does not serve)
                    mismatch = f"its check failed: {type(error).__name__}: {error}"
                _state["norms_reason"] = None if mismatch is None else (
                    f"the squared norms differ from Paddle's kernels on this machine ({mismatch})")
                _state["norms_checked"] = True
    return _state["norms_reason"]


def warn_unavailable(reason: str) -> None:
    """Say once per process why the fused operator does not run (and that the numbers are the same)."""
    if _state["warned"]:
        return
    _state["warned"] = True
    warnings.warn(
        f"paddle_llrd: {reason}; the multi-tensor step runs Paddle's own kernels instead, with the same "
        "numbers (docs: installation, 'The fused operator').",
        FusedOperatorWarning, stacklevel=stacklevel_outside_package(),
    )


def fused_adamw(params: list[Any], grads: list[Any], moment1: list[Any], moment2: list[Any],
                moment2_max: list[Any], masters: list[Any], beta1_pows: list[Any], beta2_pows: list[Any],
                clip_values: list[Any], param_starts: list[Any], global_lr: Any, layout: list[int],
                scalars: list[float]) -> None:
    """One call of ``paddle_llrd_fused_adamw`` (see ``csrc/fused_adamw.cc`` for the arguments)."""
    paddle._C_ops._run_custom_op(ADAMW_OP, params, grads, moment1, moment2, moment2_max, masters, beta1_pows,
                                 beta2_pows, clip_values, param_starts, global_lr, layout, doubles_as_ints(scalars))


def ema_update(shadows: list[Any], values: list[Any], spans: list[int], decay: float, threads: int) -> None:
    """One call of ``paddle_llrd_ema_update``: ``values[i]`` averaged into ``shadows[spans[2i]]`` from
    offset ``spans[2i + 1]`` on."""
    settings = doubles_as_ints([decay]) + [threads]
    paddle._C_ops._run_custom_op(EMA_OP, shadows, values, spans, settings)


def squared_norms(grads: list[Any], squares: Any, total: Any, threads: int) -> None:
    """One call of ``paddle_llrd_squared_norms``: each of the float32 CPU ``grads``' squared L2
    norm into ``squares`` (float32, one element per gradient) and their sum into ``total``
    (float32, one element), as Paddle's ``squared_l2_norm`` and ``stack(...).sum()`` compute them.
    Where a gradient is not a float32 CPU tensor it writes nothing."""
    paddle._C_ops._run_custom_op(NORMS_OP, grads, squares, total, [threads])


def zero_gradients(grads: list[Any], threads: int) -> None:
    """One call of ``paddle_llrd_zero_fill``: the contiguous, dense, floating-point CPU
    tensors ``grads`` set to zero (all bits clear) on ``threads`` threads, with streaming stores."""
    paddle._C_ops._run_custom_op(ZERO_OP, grads, [threads])


def build(verbose: bool = True) -> str | None:
    """Build (or find) the operators and load them here; the reason they cannot serve, or None.

    ``python -m paddle_llrd build-operator`` (which ``make install`` runs) calls it
    and prints one line either way; installation succeeds without them.
    """
    reason = unavailable_reason()
    if verbose:
        if reason is None:
            print(f"paddle_llrd: fused AdamW operator ready ({_library()})")
        else:
            print(f"paddle_llrd: {reason}; AdamWDL runs Paddle's kernels instead, with the same numbers")
    return reason

