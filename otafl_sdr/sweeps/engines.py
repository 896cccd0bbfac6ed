"""Where a sweep's cells run: ``run_local`` (spawned worker processes) and ``run_ray`` (one Ray task per
cell); each calls ``run_cell(base, overrides, out, threads)`` per cell, fills ``rows`` (cell label -> its row)
and ticks the progress bar as cells finish."""
from __future__ import annotations

import os

from otafl_sdr.errors import UserError


def run_local(run_cell, todo, base, threads, workers, rows, bar) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    if not todo:
        return
    ctx = mp.get_context("spawn")     # torch and fork do not mix; each worker imports afresh
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futs = {pool.submit(run_cell, base, c.overrides, str(c.out), threads): c for c in todo}
        try:
            for f in as_completed(futs):
                rows[futs[f].label] = f.result()
                if bar is not None:
                    bar.update(1)
        except KeyboardInterrupt:
            for f in futs:
                f.cancel()
            raise


def run_ray(run_cell, todo, base, threads, address, rows, bar) -> None:
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
            if bar is not None:
                bar.update(1)
    finally:
        if started:
            ray.shutdown()
