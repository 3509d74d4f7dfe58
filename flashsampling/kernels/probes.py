"""Device functions of the Gluon kernel's timing probes (:data:`.pingpong.NOISES`), not samplers.

They price the epilogue's instructions beside the other consumer group's MMAs (benchmarks/NOTES.md, session 12):

* :func:`filler`: ``COUNT`` steps of one kind of dependent work per token or token pair, on top of the noise-free
  scan (``filler_<kind>`` for each of :data:`FILLER_KINDS`);
* :func:`threefry_proxy`: the words of a multiply-free counter-based generator (Threefry-4x32), in place of Philox's
  in the exact noise's fast pass.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

#: The filler probes' instruction kinds, in the order of their ``NOISES`` codes.
FILLER_KINDS = ("ffma", "imad", "imul", "alu", "hilo")
FILLER_FFMA = gl.constexpr(FILLER_KINDS.index("ffma"))
FILLER_IMAD = gl.constexpr(FILLER_KINDS.index("imad"))
FILLER_IMUL = gl.constexpr(FILLER_KINDS.index("imul"))
FILLER_HILO = gl.constexpr(FILLER_KINDS.index("hilo"))

THREEFRY_ROT_A = gl.constexpr((10, 11, 13, 23, 6, 17, 25, 18))
THREEFRY_ROT_B = gl.constexpr((26, 21, 27, 5, 20, 11, 10, 20))


@gluon.jit
def _mix(a, b, R: gl.constexpr):
    """One Threefry mix: ``a += b; b = rotl(b, R) ^ a``."""
    a = a + b
    b = ((b << R) | (b >> (32 - R))) ^ a
    return a, b


@gluon.jit
def _key_word(i: gl.constexpr, k0, k1, ks4):
    """Word ``i`` (0..4) of the Threefry key schedule ``(k0, k1, 0, 0, ks4)``."""
    if i == 0:
        return k0
    elif i == 1:
        return k1
    elif i == 4:
        return ks4
    else:
        return k0 * 0


@gluon.jit
def threefry_proxy(c0, c1, c2, c3, k0, k1, N_ROUNDS: gl.constexpr):
    """Threefry-4x32 with ``N_ROUNDS`` rounds on uint32 counters and the key ``(k0, k1, 0, 0)``, in Random123's shape
    (Salmon et al., SC 2011): per round two mixes on alternating word pairs, the key schedule added every 4 rounds.
    For the timing probe ``NOISES["threefry_proxy"]`` only: the words are not checked against a reference."""
    ks4 = k0 ^ k1 ^ 0x1BD11BDA
    x0 = c0 + k0
    x1 = c1 + k1
    x2 = c2
    x3 = c3
    for r in gl.static_range(N_ROUNDS):
        if r % 2 == 0:
            x0, x1 = _mix(x0, x1, THREEFRY_ROT_A[r % 8])
            x2, x3 = _mix(x2, x3, THREEFRY_ROT_B[r % 8])
        else:
            x0, x3 = _mix(x0, x3, THREEFRY_ROT_A[r % 8])
            x2, x1 = _mix(x2, x1, THREEFRY_ROT_B[r % 8])
        if r % 4 == 3:
            x0 = x0 + _key_word((r // 4 + 1) % 5, k0, k1, ks4)
            x1 = x1 + _key_word((r // 4 + 2) % 5, k0, k1, ks4)
            x2 = x2 + _key_word((r // 4 + 3) % 5, k0, k1, ks4)
            x3 = x3 + _key_word((r // 4 + 4) % 5, k0, k1, ks4) + (r // 4 + 1)
    return x0, x1, x2, x3


@gluon.jit
def filler(s_even, s_odd, COUNT: gl.constexpr, KIND: gl.constexpr):
    """The timing probes ``filler_<kind>``, ``kind = FILLER_KINDS[KIND]``: ``COUNT`` steps of dependent work on the
    pair's scores, folded back into them so that none is dead code.

    * ``filler_ffma``: per token, ``s = s * a + b`` with ``a`` just below 1 (one ``FFMA`` per step and token).
    * ``filler_imad``: per pair, from the even score's bits, ``u = hi(u * M) ^ lo(u * M)`` with Philox's
      multiplier (``IMAD.WIDE.U32``, ``LOP3`` and, as compiled, a ``VIADD`` per step and pair).
    * ``filler_imul``: per pair, ``u = lo(u * M) ^ v`` with ``v`` the odd score's bits (``IMAD`` + ``LOP3``).
    * ``filler_alu``: per pair, ``u = rotl(u, 5) ^ v`` (``SHF`` + ``LOP3``).
    * ``filler_hilo``: per pair, ``u = umulhi(u, M) ^ lo(u * M)`` (``IMAD.HI.U32``, ``IMAD``, ``LOP3``):
      ``filler_imad``'s integers from other instructions.

    The integer probes end with the odd score replaced by the even one where ``u`` is 0 (a compare and a select per
    pair).  The instruction counts per step are those of the SASS (benchmarks/NOTES.md, session 12)."""
    if KIND == FILLER_FFMA:
        for _ in gl.static_range(COUNT):
            s_even = s_even * 0.99999994 + 1.0e-30
            s_odd = s_odd * 0.99999994 + 1.0e-30
    else:
        u = s_even.to(gl.uint32, bitcast=True)
        v = s_odd.to(gl.uint32, bitcast=True)
        for _ in gl.static_range(COUNT):
            if KIND == FILLER_IMAD:
                p = u.to(gl.uint64) * 0xD2511F53
                u = (p >> 32).to(gl.uint32) ^ p.to(gl.uint32)
            elif KIND == FILLER_IMUL:
                u = (u * 0xD2511F53) ^ v
            elif KIND == FILLER_HILO:
                u = gl.umulhi(u, 0xD2511F53) ^ (u * 0xD2511F53)
            else:
                u = ((u << 5) | (u >> 27)) ^ v
        s_odd = gl.where(u == 0, s_even, s_odd)
    return s_even, s_odd
