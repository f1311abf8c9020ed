"""The least-lost-work rule: which running low-priority work a preemption evicts first.

One definition for every replay that preempts (the harvesting replay's ``spotgpu``
policy, compiled into :mod:`fleetaudit.whatif.harvest_kernel`, and the by-time
placement replay, :mod:`fleetaudit.whatif.placement.replay`):

- a victim loses the work since its last checkpoint: its run time since it last
  (re)started modulo its checkpoint interval, or all of it without checkpoints
  (:func:`since_checkpoint`);
- lost work is that time times the victim's GPUs (:func:`lost_work`);
- victims go least lost work first; ties to the newest (latest run start), then
  the lower job index (:func:`victim_key`).

Plain Python on integers (µs and micro-GPU units), so that numba compiles the
same functions into the harvesting kernel and the placement replay calls them as
they are; Python's integers do not overflow, the kernel splits the product in two
64-bit words instead.
"""

from __future__ import annotations


def since_checkpoint(elapsed: int, checkpoint: int) -> int:
    """Run time lost by an eviction after ``elapsed`` of run (µs): the time since the
    last checkpoint, taken every ``checkpoint`` µs of run (0: never, so all of it).

    >>> since_checkpoint(3_500, 1_000), since_checkpoint(3_500, 0)
    (500, 3500)
    """
    return elapsed % checkpoint if checkpoint else elapsed


def lost_work(gpu_units: int, elapsed: int, checkpoint: int) -> int:
    """GPU-units x µs an eviction loses: the victim's GPUs times :func:`since_checkpoint`.

    >>> lost_work(2, 3_500, 1_000)
    1000
    """
    return gpu_units * since_checkpoint(elapsed, checkpoint)


def victim_key(gpu_units: int, run_start: int, checkpoint: int, t: int, job: int) -> tuple[int, int, int]:
    """The sort key of a victim at instant ``t`` (least lost work, then newest, then job).

    >>> sorted([victim_key(8, 0, 0, 100, 0), victim_key(1, 50, 0, 100, 1),
    ...         victim_key(1, 60, 0, 100, 2)])
    [(40, -60, 2), (50, -50, 1), (800, 0, 0)]
    """
    return lost_work(gpu_units, t - run_start, checkpoint), -run_start, job
