"""Where a sweep's cells run: ``run_local`` (spawned worker processes) and ``run_ray`` (one Ray task per
cell); each calls ``run_cell(base, overrides, out, threads)`` per cell, fills ``rows`` (cell label -> its row)
and ticks the progress bar as cells finish; ``on_done(cell)`` (optional) is called as each cell returns (a
results page's compact data is exported then, so a sweep killed midway keeps every finished cell)."""
from __future__ import annotations

import os

from otafl_sdr.errors import Terminated, UserError, raise_terminated

_STOPPED: list[int] = []      # in a local worker: the signal that told it to stop (no new cell starts then)


def _worker_init() -> None:
    raise_terminated(fired=_STOPPED)


def _cell(run_cell, *args):
    """A local worker's cell: ``run_cell(*args)``, unless the worker was told to stop (a cell already in the
    pool's call queue is not cancelled by the sweep; it must not start either)."""
    if _STOPPED:
        raise Terminated(_STOPPED[0])
    return run_cell(*args)


def run_local(run_cell, todo, base, threads, workers, rows, bar, on_done=None) -> None:
    """Ctrl-C reaches the workers from the terminal; a SIGTERM to the sweep alone (errors.Terminated) is passed
    on to them, and stops their runs as it stops a run (summary written, the cell resumable). Either way the
    cells not started are cancelled, those that stopped keep their rows, and the exception goes on."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    if not todo:
        return
    ctx = mp.get_context("spawn")     # torch and fork do not mix; each worker imports afresh
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init) as pool:
        futs = {pool.submit(_cell, run_cell, base, c.overrides, str(c.out), threads): c for c in todo}
        try:
            for f in as_completed(futs):
                rows[futs[f].label] = f.result()
                if on_done is not None:
                    on_done(futs[f])
                if bar is not None:
                    bar.update(1)
        except KeyboardInterrupt as e:
            for f in futs:
                f.cancel()
            if isinstance(e, Terminated):
                for p in mp.active_children():
                    try:
                        os.kill(p.pid, e.signum)
                    except ProcessLookupError:
                        pass
            pool.shutdown(wait=True)
            for f, c in futs.items():             # the cells that stopped: their rows (status: stopped)
                if f.done() and not f.cancelled() and f.exception() is None and c.label not in rows:
                    rows[c.label] = f.result()
            raise


def run_ray(run_cell, todo, base, threads, address, rows, bar, on_done=None) -> None:
    try:
        import ray
    except ImportError:
        raise UserError("--engine ray needs Ray (pip install ray)") from None
    if not todo:
        return
    started = False
    if not ray.is_initialized():
        kw = {"address": address} if address else {"num_cpus": os.cpu_count() or 1, "include_dashboard": False}
        ray.init(ignore_reinit_error=True, logging_level="ERROR", log_to_driver=False, **kw)
        started = True
    try:
        task = ray.remote(num_cpus=threads)(run_cell)
        refs = {task.remote(base, c.overrides, str(c.out.resolve()), threads): c for c in todo}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            rows[refs[ready[0]].label] = ray.get(ready[0])
            if on_done is not None:
                on_done(refs[ready[0]])
            if bar is not None:
                bar.update(1)
    finally:
        if started:
            ray.shutdown()
