"""Spawned worlds of ranks under a deadline: a hang fails the test instead of stalling the suite."""

from __future__ import annotations

import multiprocessing as mp


def run_world(target, world: int, args: tuple = (), deadline: float = 300.0) -> None:
    """Run ``target(rank, *args)`` in ``world`` spawned processes and wait at most ``deadline`` seconds in all.

    Raises ``TimeoutError`` (after terminating every process still alive) if a rank has not finished by then, and
    ``RuntimeError`` if a rank exited with an error.
    """
    import time

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, args=(rank, *args)) for rank in range(world)]
    for p in procs:
        p.start()
    end = time.monotonic() + deadline
    for p in procs:
        p.join(max(0.0, end - time.monotonic()))
    alive = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in alive:
        procs[r].terminate()
        procs[r].join(5)
    if alive:
        raise TimeoutError(f"rank(s) {alive} of a world of {world} did not finish within {deadline} s")
    codes = [p.exitcode for p in procs]
    if any(codes):
        raise RuntimeError(f"a world of {world} ended with exit codes {codes}")
