"""The tensor-parallel samplers' collectives and their first exchange: every rank's request, checked by every rank.

:func:`agree` gathers a fixed-length int64 header per rank (:data:`HEADER_FIELDS`) before any work and
:func:`check_requests` applies the same checks to the same table on every rank, so that every rank raises alike: a
rank's own argument error (that rank raises it, the others a ``ValueError`` that names and quotes it), arguments
that differ between ranks, shards that do not tile ``[0, V)``.  Where every rank passed a temperature tensor, the
tensors' values themselves are gathered next (``B`` float64 words per rank) and compared exactly
(:func:`check_temperature_rows`): no digest that two different tensors could share.  The table also settles the
shard starts and a drawn seed.  :func:`all_gather_rows` bounds every wait by a timeout.  The samplers are in
:mod:`flashsampling.distributed`, whose docstring describes the exchanges.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import numbers
import struct
import time

import numpy as np
import torch
import torch.distributed as dist

from . import _validate as check
from ._request import Request

COMBINES = ("pathwise", "factorized")
#: The entry points, as the request header names them.
ENTRIES = ("sample_tp", "sample_tp_from_logits")
#: Seconds each exchange waits for the other ranks: long enough for a first call's kernel compilation on a slower
#: rank (tens of seconds for the Gluon kernel), short against the process group's 30 minutes.
DEFAULT_TIMEOUT_S = 120.0
#: The request header's int64 words, in order (then :data:`MESSAGE_WORDS` words of a rejected rank's message).
HEADER_FIELDS = ("tag", "status", "entry", "B", "D", "num_samples", "dtype", "combine", "return_logsumexp",
                 "host_checks", "seed_given", "seed", "vocab_size", "temperature_kind", "temperature", "vocab_start",
                 "size")  # fmt: skip
#: Words of a rejected rank's message in its header (256 bytes of UTF-8).
MESSAGE_WORDS = 32
#: The header's first word: a rank that is in another collective (or another version of this one) is told apart.
_TAG = 0x46534D54505232  # "FSMTPR2": version 2 gathers temperature tensors' values (version 1 hashed them)
#: The fields every rank must pass alike, with the names the messages give them.
_AGREED = (("entry", "entry points"), ("B", "batch sizes B"), ("D", "hidden sizes D"), ("num_samples", "num_samples"),
           ("dtype", "dtypes"), ("combine", "combine"), ("return_logsumexp", "return_logsumexp"),
           ("host_checks", "host_checks"), ("vocab_size", "vocab_size"))  # fmt: skip
#: Status of a rank's own argument checks (and, in the exchange of candidates, of its stage 1).
_OK, _TYPE_ERROR, _VALUE_ERROR, _OTHER_ERROR = 0, 1, 2, 3


# --------------------------------------------------------------------------------------------
# Collectives
# --------------------------------------------------------------------------------------------


def check_group(group) -> None:
    """``None`` (the default group: the world, or a world of one without an initialized process group) or a
    ``torch.distributed.ProcessGroup`` of an initialized process group; anything else is refused on every world
    size alike (a string such as ``"world"`` is not a group, even where there is only one rank)."""
    if group is None:
        return
    process_group = getattr(dist, "ProcessGroup", None) if dist.is_available() else None
    if process_group is None or not isinstance(group, process_group):
        raise TypeError(f"group must be a torch.distributed.ProcessGroup or None, got {type(group).__name__}")
    if not dist.is_initialized():
        raise ValueError("group is a ProcessGroup but no process group is initialized (torch.distributed."
                         "init_process_group was not called, or the group was destroyed)")  # fmt: skip


def world_of(group=None) -> tuple[int, int]:
    """``(rank, world_size)`` of ``group`` (checked by :func:`check_group`); ``(0, 1)`` without an initialized
    process group."""
    check_group(group)
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("this rank is not a member of group: every rank that calls must belong to it")
    return rank, dist.get_world_size(group)


def is_gloo(group) -> bool:
    """Whether ``group`` exchanges through gloo (host memory); false without an initialized process group."""
    return dist.is_available() and dist.is_initialized() and dist.get_backend(group) == "gloo"


def all_gather_rows(payload: torch.Tensor, group=None, *, timeout: float | None = None,
                    what: str = "the exchange", keep_host: bool = False) -> torch.Tensor:  # fmt: skip
    """All-gather a 1-D tensor (same length on every rank) -> ``[world, N]`` in rank order, on the payload's device
    (``keep_host``: where the collective left it, host memory for gloo, so that reading it costs nothing).

    ``timeout`` (seconds): the longest wait for the other ranks (gloo; on NCCL only where the result is read on the
    host anyway, see the module docstring), then ``TimeoutError``; a failed collective (a rank that crashed)
    raises ``RuntimeError``.  ``what`` names the exchange in those messages."""
    if not (dist.is_available() and dist.is_initialized()):
        return payload[None]
    buf = payload.contiguous()
    gloo = is_gloo(group)
    if gloo and buf.device.type != "cpu":
        buf = buf.cpu()
    outs = [torch.empty_like(buf) for _ in range(dist.get_world_size(group))]
    began = time.monotonic()
    work = dist.all_gather(outs, buf, group=group, async_op=True)
    try:
        if timeout is None:
            work.wait()
        else:
            work.wait(datetime.timedelta(seconds=timeout))
    except RuntimeError as exc:
        waited = time.monotonic() - began
        rank = dist.get_rank(group)
        hint = ("a rank failed before it (see its own error) or is not calling with this group; the group's "
                "collectives are now out of step: destroy the process group")  # fmt: skip
        if timeout is not None and waited >= 0.9 * timeout:
            raise TimeoutError(f"rank {rank} waited {waited:.1f} s (timeout={timeout} s) for the other ranks in "
                               f"{what}: {hint}") from exc  # fmt: skip
        raise RuntimeError(f"rank {rank}: {what} failed after {waited:.1f} s ({str(exc).splitlines()[0][:200]}): "
                           f"{hint}") from exc  # fmt: skip
    table = torch.stack(outs)
    return table if keep_host else table.to(payload.device)


# --------------------------------------------------------------------------------------------
# The first exchange: every rank's request
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Shard:
    """This rank's checked call: its request and what the header says of it."""

    request: Request
    entry: int
    B: int
    D: int
    dtype: torch.dtype
    combine: str
    return_logsumexp: bool
    seed_given: bool
    vocab_size: int | None
    vocab_start: int | None
    size: int


@dataclasses.dataclass(frozen=True)
class Agreed:
    """What the first exchange settled: the request (with the common seed), this rank's shard start, every rank's
    shard start (a device tensor: the group ids of the combine) and the global ``V``."""

    request: Request
    start: int
    starts: torch.Tensor
    vocab_size: int


def check_timeout(timeout) -> float:
    if isinstance(timeout, (bool, np.bool_)) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout must be a number of seconds, got {type(timeout).__name__}")
    t = float(timeout)
    if not (t > 0 and math.isfinite(t)):
        raise ValueError(f"timeout={timeout} must be a finite number of seconds > 0")
    return t


def check_shard_arguments(combine, vocab_start, vocab_size, return_logsumexp) -> None:
    if not isinstance(combine, str) or combine not in COMBINES:
        raise ValueError(f"combine={combine!r} must be one of {COMBINES}")
    if vocab_start is not None:
        check.check_int("vocab_start", vocab_start, low=0, high=check.MAX_COUNTER)
    if vocab_size is not None:
        check.check_int("vocab_size", vocab_size, low=1, high=check.MAX_COUNTER + 1)
    check.check_flag("return_logsumexp", return_logsumexp)


def _temperature_words(request: Request, device: torch.device) -> torch.Tensor:
    """``[kind, value]`` (int64, on ``device``): a number's float64 bits with ``-0.0`` read as ``0.0`` (kind 0: the
    values are compared, and ``-0.0`` and ``0.0`` are the same greedy temperature), or ``[1, 0]`` for a tensor,
    whose values travel in their own exchange (:func:`temperature_rows`)."""
    t = request.temperature
    if isinstance(t, torch.Tensor):
        return torch.tensor([1, 0], dtype=torch.int64).to(device)
    bits = struct.unpack("<q", struct.pack("<d", float(t) + 0.0))[0]  # -0.0 + 0.0 == +0.0
    return torch.tensor([0, bits], dtype=torch.int64).to(device)


def temperature_rows(temperature: torch.Tensor, batch: int) -> torch.Tensor:
    """A temperature tensor's values as the caller gave them, one per row (a 0-dim tensor repeated ``batch``
    times), as the int64 bits of their float64 values (exact for every float dtype), with ``-0.0`` read as ``0.0``
    and every NaN as one NaN: equal words iff equal values, NaN counting as equal to NaN.  On the tensor's
    device (no synchronization)."""
    v = temperature.detach().reshape(-1).expand(batch).to(torch.float64) + 0.0
    v = torch.where(torch.isnan(v), torch.full_like(v, math.nan), v)
    return v.contiguous().view(torch.int64)


def check_temperature_rows(table: torch.Tensor) -> None:
    """The exchange of temperature tensors' values: ``table`` int64 ``[world, B]`` (rank ``r``'s row: its
    :func:`temperature_rows`), the same on every rank; ``ValueError`` naming the first row whose values differ."""
    differ = (table != table[:1]).any(dim=0)
    if not bool(differ.any()):
        return
    row = int(torch.nonzero(differ)[0, 0])
    values = table[:, row].contiguous().view(torch.float64).tolist()
    shown = ", ".join(f"rank {r}: {v!r}" for r, v in enumerate(values))
    raise ValueError(f"ranks passed different temperature tensors (row {row}: {shown}); every rank must pass the "
                     "same values")  # fmt: skip


def _encode_message(text: str) -> list[int]:
    raw = text.encode("utf-8")[: 8 * MESSAGE_WORDS].ljust(8 * MESSAGE_WORDS, b"\0")
    return list(struct.unpack(f"<{MESSAGE_WORDS}q", raw))


def _decode_message(words) -> str:
    raw = struct.pack(f"<{MESSAGE_WORDS}q", *[int(w) for w in words])
    return raw.rstrip(b"\0").decode("utf-8", errors="replace")


def _header(shard: Shard | None, error: BaseException | None, device: torch.device) -> torch.Tensor:
    """This rank's request header (:data:`HEADER_FIELDS`, then the message words) on ``device``."""
    if shard is None:
        status = _TYPE_ERROR if isinstance(error, TypeError) else _VALUE_ERROR
        words = [_TAG, status] + [0] * (len(HEADER_FIELDS) - 2) + _encode_message(f"{type(error).__name__}: {error}")
        return torch.tensor(words, dtype=torch.int64).to(device)
    r = shard.request
    seed = r.seed - 2**64 if r.seed >= 2**63 else r.seed
    head = [_TAG, _OK, shard.entry, shard.B, shard.D, r.num_samples, check.FLOAT_DTYPES.index(shard.dtype),
            COMBINES.index(shard.combine), int(shard.return_logsumexp), int(r.host_checks), int(shard.seed_given),
            seed, -1 if shard.vocab_size is None else shard.vocab_size]  # fmt: skip
    tail = [-1 if shard.vocab_start is None else shard.vocab_start, shard.size] + [0] * MESSAGE_WORDS
    temp = _temperature_words(r, device)
    return torch.cat([torch.tensor(head, dtype=torch.int64).to(device), temp,
                      torch.tensor(tail, dtype=torch.int64).to(device)])  # fmt: skip


def failure_words(error: BaseException | None) -> list[int]:
    """``[status] + MESSAGE_WORDS`` words: how this rank's work after the first exchange ended (its stage 1: an
    out-of-memory, a kernel that does not compile for this rank's ``tiles``), carried in the exchange of candidates
    so that its peers raise too instead of returning tokens drawn without its shard."""
    if error is None:
        return [_OK] + [0] * MESSAGE_WORDS
    status = _TYPE_ERROR if isinstance(error, TypeError) else _VALUE_ERROR if isinstance(error, ValueError) else \
        _OTHER_ERROR  # fmt: skip
    return [status] + _encode_message(f"{type(error).__name__}: {error}")


def raise_on_failures(table: list[list[int]], error: BaseException | None, what: str) -> None:
    """Every rank's :func:`failure_words` (``[world][1 + MESSAGE_WORDS]``, the same on every rank): this rank
    re-raises its own ``error``; the others raise ``ValueError`` (the failed ranks raised ``TypeError`` or
    ``ValueError``) or ``RuntimeError`` naming the failed ranks and quoting them."""
    failed = [r for r, row in enumerate(table) if row[0] != _OK]
    if not failed:
        return
    if error is not None:
        raise error
    quoted = "; ".join(f"rank {r}: {_decode_message(table[r][1:])}" for r in failed)
    kind = ValueError if all(table[r][0] in (_TYPE_ERROR, _VALUE_ERROR) for r in failed) else RuntimeError
    raise kind(f"rank(s) {', '.join(map(str, failed))} failed in {what} ({quoted}); every rank raises")


def _shown(field: str, value: int) -> str:
    """A header value as the caller passed it."""
    if field == "entry":
        return ENTRIES[value] if 0 <= value < len(ENTRIES) else str(value)
    if field == "dtype":
        return str(check.FLOAT_DTYPES[value]) if 0 <= value < len(check.FLOAT_DTYPES) else str(value)
    if field == "combine":
        return repr(COMBINES[value]) if 0 <= value < len(COMBINES) else str(value)
    if field in ("return_logsumexp", "host_checks"):
        return str(bool(value))
    if field == "vocab_size":
        return "None" if value < 0 else str(value)
    return str(value)


def _differ(table: list[list[int]], field: str) -> bool:
    i = HEADER_FIELDS.index(field)
    return len({row[i] for row in table}) > 1


def _by_rank(table: list[list[int]], field: str, show=None) -> str:
    i = HEADER_FIELDS.index(field)
    show = show or (lambda v: _shown(field, v))
    return ", ".join(f"rank {r}: {show(row[i])}" for r, row in enumerate(table))


def check_requests(table: list[list[int]], rank: int, error: BaseException | None) -> tuple[list[int], int]:
    """The checks of the first exchange on the gathered headers ``table`` (``[world][words]``, the same on every
    rank, so every rank raises alike): ``(starts, V)``, the shards' global starts in rank order and the global
    vocabulary size.  ``error``: this rank's own argument error, re-raised here."""
    f = {name: i for i, name in enumerate(HEADER_FIELDS)}
    if any(row[f["tag"]] != _TAG for row in table):
        raise ValueError("the ranks are not all in the same tensor-parallel sampling call (their request headers "
                         "differ in kind): every rank must call sample_tp or sample_tp_from_logits "
                         "together")  # fmt: skip
    rejected = [r for r, row in enumerate(table) if row[f["status"]] != _OK]
    if rejected:
        if error is not None:
            raise error
        quoted = "; ".join(f"rank {r}: {_decode_message(table[r][len(HEADER_FIELDS) :])}" for r in rejected)
        raise ValueError(f"rank(s) {', '.join(map(str, rejected))} rejected their arguments ({quoted}); every rank "
                         "raises")  # fmt: skip
    for field, label in _AGREED:
        if _differ(table, field):
            raise ValueError(f"ranks passed different {label}: {_by_rank(table, field)}; every rank must pass the "
                             "same")  # fmt: skip
    if _differ(table, "seed_given") or (table[0][f["seed_given"]] and _differ(table, "seed")):
        shown = _by_rank(table, "seed", lambda v: str(v % 2**64)) if not _differ(table, "seed_given") else \
            _by_rank(table, "seed_given", lambda v: "an int" if v else "None")  # fmt: skip
        raise ValueError(f"ranks passed different seeds ({shown}); every rank must pass the same seed (or all pass "
                         "None)")  # fmt: skip
    if _differ(table, "temperature_kind"):
        kinds = _by_rank(table, "temperature_kind", lambda v: "a tensor" if v else "a number")
        raise ValueError(f"ranks passed different temperatures ({kinds}); every rank must pass the same")
    if _differ(table, "temperature"):  # numbers (a tensor's word is 0: its values are compared next)
        shown = _by_rank(table, "temperature", lambda v: repr(struct.unpack("<d", struct.pack("<q", v))[0]))
        raise ValueError(f"ranks passed different temperatures ({shown}); every rank must pass the same")
    sizes = [row[f["size"]] for row in table]
    given = [row[f["vocab_start"]] for row in table]
    starts = [g if g >= 0 else sum(sizes[:r]) for r, g in enumerate(given)]
    spans = sorted((a, a + m) for a, m in zip(starts, sizes))
    pos = 0
    for a, b in spans:
        if a != pos:
            raise ValueError(f"the ranks' shards {spans} do not tile [0, V): a gap or overlap at column {min(a, pos)}")
        pos = b
    vocab_size = table[0][f["vocab_size"]]
    if vocab_size >= 0 and pos != vocab_size:
        raise ValueError(f"the ranks' shards cover [0, {pos}) but vocab_size={vocab_size}")
    check.check_nonempty("the ranks' shards", pos, "V")
    check.check_counter("V (the shards' total)", pos - 1)
    return starts, pos


def _exchange_device(group, local: torch.device | None) -> torch.device:
    """Where the headers travel: host memory for gloo (and a world of one), the GPU for NCCL."""
    if not (dist.is_available() and dist.is_initialized()) or is_gloo(group):
        return torch.device("cpu")
    return local if local is not None and local.type == "cuda" else torch.device("cuda", torch.cuda.current_device())


def agree(shard: Shard | None, error: BaseException | None, group, timeout: float) -> Agreed:
    """The first exchange: gather every rank's request header (:func:`_header`), check them
    (:func:`check_requests`), and settle the seed and the shard starts."""
    rank, _ = world_of(group)
    local = shard.request.inv_temp.device if shard is not None else None
    where = _exchange_device(group, local)
    header = _header(shard, error, where)
    table = all_gather_rows(header, group, timeout=timeout, what="the exchange of requests").cpu().tolist()
    starts, V = check_requests(table, rank, error)
    request = shard.request
    if isinstance(request.temperature, torch.Tensor):  # every rank passed a tensor of B rows (checked above)
        rows = temperature_rows(request.temperature, shard.B).to(where)
        check_temperature_rows(all_gather_rows(rows, group, timeout=timeout, what="the exchange of temperatures")
                               .cpu())  # fmt: skip
    if not shard.seed_given:
        common = table[0][HEADER_FIELDS.index("seed")] % 2**64
        request = dataclasses.replace(request, seed=common)
    device = request.inv_temp.device
    return Agreed(request, starts[rank], _device_ints(starts, device), V)


def _device_ints(values, device: torch.device) -> torch.Tensor:
    """A small int64 tensor on ``device`` without stalling: on CUDA through pinned memory and an
    asynchronous copy (a pageable host-to-device copy would wait for the queued kernels)."""
    t = torch.tensor(values, dtype=torch.int64)
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
