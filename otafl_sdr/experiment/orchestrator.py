"""The run loop (docs/architecture.md, "One round, as the data flows"): build the run once
(workload/build.py), solve the privacy target before round 1 (workload/targeting.py), then for each iteration run the one round
pipeline (rounds/pipeline.py: plan -> account -> record -> release -> step -> row) over the run's
transport (in process over an air, or the testbed's nodes), append the row, checkpoint; finally the
summary and the plots. A results folder has one writer (a lock) and is never overwritten."""
from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from otafl_sdr.results import files as results

from otafl_sdr.results import run_folder
from otafl_sdr.config.schema import Config, to_toml
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import AirError, Terminated, UserError, signal_number
from otafl_sdr.noise_source import describe as noise_source_description
from otafl_sdr.configure.plugins import load_plugins, plugin_origins
from otafl_sdr.privacy import ledger_keys
from otafl_sdr.privacy.ledger import PrivacyLedger, config_genesis
from otafl_sdr.privacy.sensitivity import basis
from otafl_sdr.workload.booking import ledger_mechanism
from otafl_sdr.rounds.pipeline import EVALUATION_FIELDS, RoundPipeline
from otafl_sdr.workload.build import build_run
from otafl_sdr.experiment.coherence_gate import check_before_rounds
from otafl_sdr.experiment.extension import prepare_extension

CHECKPOINT = "checkpoint.pt"
EXTENSION = "extension.json"      # `run --resume DIR --extend N`: client rounds added to run.rounds (config unchanged)
# `--extend N --eps E`: the budget raised to E from the next round, a line of the ledger (PrivacyLedger.raise_budget)
__all__ = ["CHECKPOINT", "EVALUATION_FIELDS", "Experiment", "RunOutcome", "make_experiment", "privacy_verdicts",
           "resume_experiment", "run_experiment"]


@dataclass
class RunOutcome:
    summary: dict
    out: Path
    stopped_reason: str = ""
    already_complete: bool = False      # a --resume of a finished run: nothing was run nor changed
    stopped_by_signal: int = 0          # the signal that stopped it (SIGINT: Ctrl-C; SIGTERM); the CLI exits 128 + it


class Experiment:
    """One FL run. ``Experiment(cfg, out).run()``; ``Experiment.resume(out).run()`` continues from the
    last checkpoint with the ledger intact. ``transport``: how rounds reach the clients (default: in this
    process over ``air.name``; the testbed's server passes its node transport)."""

    def __init__(self, cfg: Config, out: str | Path, resume: bool = False, progress: bool | None = None,
                 transport=None, extend: int = 0, eps: float | None = None):
        if eps is not None and not (resume and int(extend) > 0):      # refused before the folder is locked
            raise UserError("--eps E raises a run's privacy budget: give it with --resume DIR --extend N")
        load_plugins()
        if transport is None:
            from otafl_sdr.rounds.in_process import AirTransport
            transport = AirTransport(cfg)
        self.cfg = cfg
        self.transport = transport
        self.parts = None
        self.on_round = None
        self._closed = False
        self.out = results.prepare_out_dir(Path(out), resume=resume)
        (results.lock_out_dir if resume else run_folder.lock_new)(self.out)    # one writer per results folder
        self.resuming = resume
        self.progress = cfg.run.progress if progress is None else progress
        self.recorder = None
        self.run_id: str | None = None                  # names the ledger's key (privacy/ledger_keys.py)
        self.calibration: dict = {"calibration": "policy rule (no target calibration)"}
        self.coherence_check: dict | None = None        # the latest start's check (experiment/coherence_gate.py)
        self.extend = int(extend)                       # client rounds to add now (--extend N)
        self.raise_eps = None if eps is None else float(eps)   # the budget raised to it now (--eps E)
        self.extra_rounds = read_extension(self.out) if resume else 0   # added by earlier --extend
        if not resume:
            run_folder.write_new_config(self.out, to_toml(cfg))   # a failure leaves nothing (issue 28)

    @classmethod
    def resume(cls, out: str | Path, progress: bool | None = None, transport=None, extend: int = 0,
               eps: float | None = None) -> "Experiment":
        out = Path(out)
        if not (out / "config.toml").is_file():
            raise UserError(f"cannot resume: '{out}' holds no config.toml (not a results folder)")
        cfg = load_config(out / "config.toml")
        return cls(cfg, out, resume=True, progress=progress, transport=transport, extend=extend, eps=eps)

    def planned_client_rounds(self) -> int:
        """run.rounds plus the client rounds every --extend added (the config itself is never changed: its
        hash starts the ledger's chain, and the privacy knob stays the one planned for run.rounds)."""
        return self.cfg.run.rounds + self.extra_rounds + self.extend

    def iterations(self) -> int:
        """Iterations of the whole run (Upcycled-FL: two per client round, one of them server-only)."""
        return self.algorithm.iterations(self.planned_client_rounds())

    # -- the built run, as attributes ----------------------------------------------------------
    policy = property(lambda self: self.parts.policy)
    algorithm = property(lambda self: self.parts.algorithm)
    trainer = property(lambda self: self.parts.trainer)
    data = property(lambda self: self.parts.data)
    info = property(lambda self: self.parts.info)
    csi = property(lambda self: self.parts.csi)
    K = property(lambda self: self.parts.K)
    dim = property(lambda self: self.parts.dim)
    air = property(lambda self: getattr(self.transport, "air", None))

    def build(self) -> None:
        """Data, trainer, policy and CSI (an in-session calibration first), the ledger, the privacy target
        (unreachable targets are refused here, before round 1)."""
        cfg = self.cfg
        try:
            self.parts = build_run(cfg, calibrate=self._calibrate_in_session if cfg.calibration.session else None)
            ledger_path = self.out / "privacy_ledger.jsonl"
            chain = config_genesis(cfg)                # the ledger's hash chain starts from the config
            from otafl_sdr.workload.targeting import solve_privacy_target
            self.calibration = solve_privacy_target(self.parts, self.transport.delivered_jammer_gain())
            if self.resuming:                          # every check `verify` runs, before anything is written
                key = self._audit_for_resume()
                self.ledger = PrivacyLedger.resume(cfg.privacy, ledger_path, genesis_hash=chain, key=key)
            else:                                      # a per-run HMAC key, kept outside the folder
                self.run_id, key = ledger_keys.create(self.out, cfg, config_genesis(cfg))
                self.ledger = PrivacyLedger(cfg.privacy, ledger_path, genesis_hash=chain, key=key)
            if self.run_id is not None:                # what the folder holds, anchored beside the key
                self.ledger.anchor = ledger_keys.anchor(self.run_id, cfg)
                if not self.ledger.anchor.exists():    # a keyed run from before anchors: anchored from now on
                    self.ledger.anchor.start(self.ledger.rounds_recorded, self.ledger.head)
            if self.ledger.raises:                     # the knob as the last raised budget solved it
                self.calibration = self._solve_raised(self.ledger.raises[-1])
        except BaseException:
            self._abandon_start()                        # refused before round 1: a new run leaves no folder
            raise
        self.pipeline = RoundPipeline(self.parts, self.ledger, self.transport, self._record_iq)

    def _solve_raised(self, line: dict) -> dict:
        """The knob solved again for a raised budget's ledger line (set on the run; its calibration)."""
        from otafl_sdr.workload.targeting import solve_raised_target
        records = self.ledger.records()
        before = records[:next(i for i, r in enumerate(records) if r is line or r == line)]
        return solve_raised_target(self.parts, line["eps_budget"], line["from_round"], line["client_rounds_total"],
                                   before, line.get("jammer_gain"))

    def _audit_for_resume(self) -> bytes | None:
        """workload/ledger_checks.check_resume (reads only): a refused resume changes nothing on disk. Returns
        the ledger key (None: a legacy, unkeyed ledger); a keyed ledger whose key is not here is refused."""
        from otafl_sdr.workload.ledger_checks import check_resume
        a = check_resume(self.out, self.cfg, self.parts)
        self.run_id = a.run_id
        return a.key

    def draw_channels(self, round_index: int):
        """The round's channels as every node draws them (workload.parts.RunParts.draw_channels)."""
        return self.parts.draw_channels(round_index)

    def ledger_mechanism(self, plan):
        """The plan's mechanism as the ledger books it (workload/booking.ledger_mechanism)."""
        return ledger_mechanism(plan, self.parts.csi, self.cfg.air.name, self.transport.delivered_jammer_gain())

    def _calibrate_in_session(self, parts=None) -> Path:
        """calibration.session: measure with the run's own open radios (the LO phase changes whenever a
        radio is tuned, so a calibration from another session is stale) into DIR/calibration.json, and let
        the transport pre-compensate with it. Before round 1: noise, channels, power (and the jammer's
        delivered noise); every ``air.recalibrate_every`` rounds and whenever the transport finds the
        calibration stale (a radio re-tuned, the link drifted: ``recalibration_due``): channels and jammer."""
        from otafl_sdr.calibration.session import recalibration_steps, run_calibration
        cfg = self.cfg
        steps = ("noise", "channel", "power") + (("jammer",) if cfg.power.jammer else ()) if parts is not None \
            else recalibration_steps(cfg)
        path = self.out / "calibration.json"
        echo = (lambda m: print(f"[calibration] {m}", file=sys.stderr)) if self.progress else (lambda m: None)
        run_calibration(cfg, steps, path, air="uhd", link=self.transport.calibration_link(parts or self.parts),
                        echo=echo)
        self.transport.calibrated(path)
        return path

    def _recalibration_due(self, round_index: int, start: int) -> tuple[str, str]:
        """(why to recalibrate before iteration ``round_index``, or ''; why to stop instead, or ''): every
        ``air.recalibrate_every`` rounds with ``calibration.session``, or when the transport says so (a radio
        re-tuned since the calibration, link drift: net/server.py)."""
        every = self.cfg.air.recalibrate_every
        if self.cfg.calibration.session and every and round_index > start and (round_index - 1) % every == 0:
            return f"every {every} rounds (air.recalibrate_every)", ""
        due = getattr(self.transport, "recalibration_due", None)
        return due() if due is not None and round_index > start else ("", "")

    def _rerun_lost(self, row: dict, notes: list) -> bool:
        """A round the transport lost to a node's restart (net/rejoin.rerun_lost: the budget can take it) runs
        again as one more client round at the end of the run, booked as its own release; kept like --extend's."""
        rerun = getattr(self.transport, "rerun_lost", None)
        if rerun is None or not rerun(row, self.ledger, notes):
            return False
        self._add_client_rounds(1)
        return True

    def _add_client_rounds(self, n: int) -> None:
        """``n`` more client rounds than run.rounds (--extend, a re-run), kept in extension.json before they run."""
        self.extra_rounds += n
        if self.ledger.anchor is not None:             # anchored first: the folder is never behind its anchor
            self.ledger.anchor.extended(self.extra_rounds)
        results.atomic_write_text(self.out / EXTENSION, json.dumps({"client_rounds": self.extra_rounds}) + "\n")

    def close(self) -> None:
        """Release what an experiment built but not run holds: its radios and its folder's lock (the folder
        stays). ``run`` releases them itself; ``with Experiment(cfg, out) as exp:`` calls this on leaving."""
        if not self._closed:
            self._closed = True
            self.transport.close()
            results.unlock_out_dir(self.out)

    def __enter__(self) -> "Experiment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _abandon_start(self) -> None:
        """Close the radios; a new run's folder (nothing in it but its config) is removed."""
        self.close()
        if not self.resuming:
            shutil.rmtree(self.out, ignore_errors=True)
            if self.run_id is not None:                  # its ledger key (and anchor) go with it
                ledger_keys.forget(self.run_id, self.cfg)

    def start_transport(self) -> None:
        """Bind the transport to the built run and open the radios / wait for the nodes; a failure ends the
        run before its first round with a one-line error, and a new run's folder is removed (it holds
        nothing but its config)."""
        try:
            self.transport.bind(self.parts)
            self.transport.start()
        except BaseException:
            self._abandon_start()
            raise

    def _record_iq(self, rec, plan, attempt: int) -> None:
        """SigMF recording of the received burst, only when the operator asked for it (air.record_iq): airs
        put it in Reception.extra; an attempt whose protective noise was not delivered is marked ``fault``."""
        iq = rec.extra.pop("iq", None)
        meta = rec.extra.pop("iq_meta", None)
        if iq is None or not self.cfg.air.record_iq:
            return
        if rec.undelivered:                    # protective noise missing: the fault is marked (and charged)
            from otafl_sdr.radio.recording import mark_fault
            meta = mark_fault(meta or {}, rec.undelivered)
        if self.recorder is None:
            from otafl_sdr.radio.recording import Recorder
            self.recorder = Recorder(self.out / "iq")
        self.recorder.record(plan.round, iq, meta or {}, attempt)

    # ------------------------------------------------------------------------------------------
    def run_round(self, round_index: int, w, w_prev, notes: list):
        """One iteration through the round pipeline (a RoundOutcome); its notes join the run's ``notes``."""
        n_it = self.iterations()
        evaluate = round_index % self.cfg.run.eval_every == 0 or round_index == n_it           # run.eval_every
        outcome = self.pipeline.run(round_index, w, w_prev, evaluate)
        notes.extend(outcome.notes)
        return outcome

    def run(self) -> RunOutcome:
        """The whole run; a run that ends in an exception still releases its folder's lock (resumable)."""
        try:
            return self._run()
        except BaseException:
            results.unlock_out_dir(self.out, remove=False)
            raise

    def _run(self) -> RunOutcome:
        t_start = time.perf_counter()
        if self.resuming and not self.extend:
            try:
                done = completed_summary(self.out, self.cfg, self.extra_rounds)
            except BaseException:
                results.unlock_out_dir(self.out)       # a refused resume leaves the folder as it was
                raise
            if done is not None:                       # say so and change nothing (the lock file goes again)
                results.unlock_out_dir(self.out)
                return RunOutcome(summary=done, out=self.out, already_complete=True)
        self.build()
        cfg = self.cfg
        try:
            ck = self._load_checkpoint() if self.resuming else None
            raised = prepare_extension(self, ck) if self.extend else None
        except BaseException:
            self._abandon_start()                      # refused: the folder as it was (its lock file goes too)
            raise
        if self.extend:                                # booked before the first extra round runs
            self._add_client_rounds(self.extend)       # then the raised budget (a crash between: not raised)
            if raised is not None:
                self.ledger.raise_budget(self.raise_eps, raised)
            self.extend = 0
        n_it = self.iterations()
        w = self.parts.workload.initial_model(self.parts)
        w_prev = w.clone()
        start = 1
        if ck is not None:
            w, w_prev, start = ck["w"], ck["w_prev"], ck["iteration"] + 1
            if ck.get("policy") is not None:
                self.policy.load_state_dict(ck["policy"])
            self.parts.workload.load_state_dict(ck.get("workload") or {"targets": ck.get("targets")})
        log = results.RoundLog(self.out / "rounds.jsonl", keep_until=start - 1 if self.resuming else None)
        prior_wall = sum(r.get("wall_s", 0.0) or 0.0 for r in log.rows)
        stopped = ""
        by_signal, terminated = 0, False
        notes: list[str] = []
        board = None
        if cfg.run.tensorboard or cfg.run.mlflow:      # TensorBoard / MLflow from each row (results/tracking.py)
            from otafl_sdr.results.tracking import Trackers
            board = Trackers(cfg, self.out, log.rows, resuming=self.resuming)   # a store refused before the radios
        try:
            self.start_transport()
        except BaseException:
            if board is not None:
                board.close("failed")
            raise
        bar = None
        if self.progress:
            from tqdm.auto import tqdm                 # a widget in notebooks, a text bar in a terminal
            two = n_it != self.planned_client_rounds()     # Upcycled-FL: iterations are not client rounds
            bar = tqdm(total=n_it, initial=start - 1, desc=f"{cfg.run.name} [{cfg.air.name}]",
                       unit="iteration" if two else "client round", dynamic_ncols=True)
        try:                                                 # the radios' coherence first (uhd)
            stopped, self.coherence_check = check_before_rounds(self.parts, self.transport, self.out, start, echo=(
                (lambda m: print(f"[coherence] {m}", file=sys.stderr)) if self.progress else (lambda m: None)))
            round_index = start - 1
            while not stopped and round_index < n_it:        # n_it grows when a round lost to a restart runs again
                round_index += 1
                recal, stop = self._recalibration_due(round_index, start)
                if stop:
                    stopped = stop
                    break
                if recal:                           # fresh channel and jammer estimates (issue 25, items 1-2)
                    self.parts.use_calibration(self._calibrate_in_session())
                    notes.append(f"round {round_index}: recalibrated before it ({recal})")
                t0 = time.perf_counter()
                outcome = self.run_round(round_index, w, w_prev, notes)
                if outcome.stop:
                    stopped = outcome.stop
                    break
                w_prev, w = w, outcome.w
                row = outcome.row
                if recal:
                    row["recalibration"] = recal
                row["wall_s"] = time.perf_counter() - t0
                log.append(row)
                self.transport.row_written(round_index)
                if row.get("lost") and self._rerun_lost(row, notes):
                    n_it = self.iterations()
                    if bar is not None:
                        bar.total = n_it
                if round_index % cfg.run.checkpoint_every == 0 or round_index == n_it:
                    self._save_checkpoint(round_index, w, w_prev, len(log.rows))
                if board is not None:
                    board(log.rows[-1])
                if self.on_round is not None:
                    try:
                        self.on_round(dict(log.rows[-1]))      # the API's per-round callback
                    except Exception as e:  # noqa: BLE001 - the user's code: stop with a checkpoint and a summary
                        if not (round_index % cfg.run.checkpoint_every == 0 or round_index == n_it):
                            self._save_checkpoint(round_index, w, w_prev, len(log.rows))
                        first = (str(e).splitlines() or [""])[0][:200]
                        stopped = (f"on_round callback raised {type(e).__name__}: {first}; stopped after iteration "
                                   f"{round_index} (checkpoint saved; continue with `otafl-sdr run --resume {self.out}`)")
                        break
                if bar is not None:
                    bar.update(1)
                    eps = row.get(f"eps_{cfg.privacy.accountant}")
                    extra = {"client_round": f"{row.get('client_round', round_index)}/{self.planned_client_rounds()}"} if two else {}
                    bar.set_postfix(**extra,
                                    acc=f"{row['test_accuracy']:.3f}" if row.get("test_accuracy") is not None else "-",
                                    eps=f"{eps:.3g}" if isinstance(eps, float) else "-")
        except KeyboardInterrupt as e:          # Ctrl-C, or SIGTERM (errors.Terminated): the same stop
            by_signal, terminated = signal_number(e), isinstance(e, Terminated)
            stopped = (f"terminated ({e.signame}); resume with --resume" if terminated
                       else "interrupted (Ctrl-C); resume with --resume")
        except AirError as e:
            stopped = f"radio failure: {e}"
            notes.extend([*e.notes, *self.transport.take_notes()])     # what the failed round noted
        finally:
            if board is not None:
                board.close(stopped or ("failed" if sys.exc_info()[0] is not None else ""))
            if bar is not None:
                bar.close()
            self.transport.close()
        if terminated:                      # told to stop (SLURM, systemd: a deadline): the summary, not the figures
            notes.append(f"plots not drawn: {stopped.split(';')[0]}; `otafl-sdr report {self.out}` draws them")
        elif not cfg.run.figures:           # a sweep's many cells, a test: the rows are the results
            notes.append(f"plots not drawn: run.figures = false; `otafl-sdr report {self.out}` draws them")
        summary = self._summary(log.rows, prior_wall + 0.0, t_start, stopped, notes)
        results.write_summary(self.out, summary)
        if not terminated and cfg.run.figures:
            results.plot_rounds(self.out, log.rows, summary)
        results.unlock_out_dir(self.out)
        self._closed = True
        return RunOutcome(summary=summary, out=self.out, stopped_reason=stopped, stopped_by_signal=by_signal)

    # ------------------------------------------------------------------------------------------
    def _save_checkpoint(self, round_index: int, w, w_prev, rows_done: int):
        """Tensors and plain data only (loaded with weights_only=True: nothing in a results folder runs
        code), with the ledger's entry count and head hash and the config's hash."""
        state = {"iteration": round_index, "w": w, "w_prev": w_prev, "rows": rows_done,
                 "policy": results.to_plain(self.policy.state_dict()),
                 "workload": results.to_plain(self.parts.workload.state_dict()),
                 "ledger_count": self.ledger.rounds_recorded, "ledger_head": self.ledger.head,
                 "config_hash": config_genesis(self.cfg)}
        results.atomic_torch_save(state, self.out / CHECKPOINT)

    def _load_checkpoint(self):
        from otafl_sdr.workload.ledger_checks import load_checkpoint
        path = self.out / CHECKPOINT
        ck = load_checkpoint(path)
        if ck is None:
            return None
        ck["policy"] = results.from_plain(ck.get("policy"))
        ck["workload"] = results.from_plain(ck.get("workload"))
        ck["targets"] = results.from_plain(ck.get("targets"))     # paper 003's, in checkpoints before "workload"
        self._check_ledger_against(ck, path)
        return ck

    def _check_ledger_against(self, ck: dict, path) -> None:
        """--resume refuses a folder whose ledger is missing, shorter than the checkpoint says, rewritten,
        or whose config changed since the checkpoint (exit 2): a damaged ledger must never under-count."""
        ledger_file = self.out / "privacy_ledger.jsonl"
        if ck.get("config_hash") != config_genesis(self.cfg):
            raise UserError(f"cannot resume: '{self.out / 'config.toml'}' changed since the checkpoint was written")
        n = int(ck.get("ledger_count", 0))
        if n > 0 and not ledger_file.exists():
            raise UserError(f"cannot resume: '{ledger_file}' is missing but the checkpoint counts {n} ledger entries")
        have = self.ledger.rounds_recorded
        if have < n:
            raise UserError(f"cannot resume: '{ledger_file}' holds {have} entries but the checkpoint counts {n} "
                            f"(entries were removed)")
        recs = self.ledger.records()
        if n > 0 and recs[n - 1].get("hash") != ck.get("ledger_head"):
            raise UserError(f"cannot resume: '{ledger_file}' entry {n} is not the one the checkpoint recorded")

    def _summary(self, rows, prior_wall, t_start, stopped, notes) -> dict:
        cfg = self.cfg
        last = next((r for r in reversed(rows) if r.get("test_accuracy") is not None), {})   # last evaluated
        eps = {f"eps_{k}": v for k, v in self.ledger.epsilons().items()}
        return {
            "final_accuracy": last.get("test_accuracy"), "final_loss": last.get("train_loss"),
            "final_accuracy_round": last.get("round"),
            **eps, "delta": cfg.privacy.delta, "rounds": len(rows),
            "rounds_planned": self.iterations(), "client_rounds_planned": self.planned_client_rounds(),
            **({"extended_by": self.extra_rounds} if self.extra_rounds else {}),
            "client_rounds": sum(1 for r in rows if r.get("uses_clients")),
            "clients": self.K, "model_dim": int(self.trainer.dim), "wall_s": prior_wall + (time.perf_counter() - t_start),
            "air": cfg.air.name, "algorithm": cfg.algorithm.name, "power_policy": cfg.power.policy,
            "run_name": cfg.run.name, **({"plugins": plugin_origins(cfg)} if plugin_origins(cfg) else {}),
            "dataset": cfg.data.dataset, "seed": cfg.run.seed, "device": str(getattr(self.trainer, "device", "cpu")), "eps_target": self.ledger.budget if self.ledger.raises else cfg.privacy.eps,
            "privacy_unit": cfg.privacy.unit, "sensitivity_basis": basis(cfg.privacy.unit),
            "noise_source": noise_source_description(cfg.air.name),
            "evaluation_fields": list(EVALUATION_FIELDS),
            "max_payload_bound": float(np.max(self.info.payload_bound())),
            "jammer_rounds": sum(1 for r in rows if r.get("cj_active")),
            "capped_jammer_rounds": sum(1 for r in rows if r.get("cj_capped")),
            "lost_rounds": sum(1 for r in rows if r.get("lost")),
            **privacy_verdicts(eps, self.ledger.budget),
            **({"target_eps_config": cfg.privacy.eps,
                "budget_raises": [{k: r.get(k) for k in ("eps_budget", "eps_budget_before", "from_round",
                                                          "client_rounds", "time")} for r in self.ledger.raises]}
               if self.ledger.raises else {}),
            **self.calibration, **({"coherence_check": self.coherence_check} if self.coherence_check else {}),
            "stopped_reason": stopped, "notes": notes,
            "ledger_head": self.ledger.head, "ledger_keyed": self.ledger.key is not None,
            **({"devices": self.transport.describe()} if self.transport.describe() else {}),
            **self.parts.workload.summary_fields(self.parts, rows),
            **self.transport.summary_fields(rows),
        }


def privacy_verdicts(eps: dict, target: float) -> dict:
    """Honest reporting (issue 14): ``over_target`` when the tight (PLD) epsilon spent exceeds the target,
    and ``eps_NAME_valid`` False where a paper's closed form (``Accountant.closed_form``: paper 000's, paper 001's
    Theorem 1, paper 003's Theorem 2, paper 004's budget sum) came out below the exact PLD value of the same
    mechanism (then it is not a valid bound)."""
    from otafl_sdr.privacy.base import closed_form_names
    pld = eps.get("eps_pld")
    out = {"over_target": bool(pld is not None and pld > target)}
    for name in closed_form_names():        # eps_paper_valid, eps_otafd_valid, ...
        v = eps.get(f"eps_{name}")
        if pld is not None and v is not None:
            out[f"eps_{name}_valid"] = bool(v >= pld)
    return out


def read_extension(out: Path) -> int:
    """Client rounds that `--extend` added to the run in ``out`` (0: none; workload/ledger_checks.py)."""
    from otafl_sdr.workload.ledger_checks import read_extension as read
    return read(out)


def completed_summary(out: Path, cfg: Config, extra_rounds: int = 0) -> dict | None:
    """summary.json of a run in ``out`` that finished every planned iteration (not stopped), else None. A
    finished folder gets the checks `verify` and --resume run (workload/ledger_checks.audit, read-only, the
    booked figures not re-derived): damage is refused as a resume refuses it, never called complete."""
    from otafl_sdr.registry import ALGORITHMS
    from otafl_sdr.results.safe_files import load_json
    from otafl_sdr.workload.ledger_checks import audit, load_checkpoint
    out = Path(out)
    if not (out / "summary.json").is_file():
        return None
    try:
        summary = load_json(out / "summary.json", "summary")
    except UserError:
        return None                                  # unreadable: the resume rewrites it
    if not isinstance(summary, dict) or summary.get("stopped_reason"):
        return None
    try:
        ck = load_checkpoint(out / CHECKPOINT)
        n_it = ALGORITHMS.get(cfg.algorithm.name)(cfg).iterations(cfg.run.rounds + extra_rounds)
        if ck is None or int(ck.get("iteration", 0)) < n_it:
            return None
        audit(out, cfg, None)
    except UserError as e:
        raise UserError(f"cannot resume: {e}") from None
    return summary


def make_experiment(cfg: Config, out: str | Path, resume: bool = False, progress: bool | None = None,
                    transport=None) -> Experiment:
    return Experiment(cfg, out, resume=resume, progress=progress, transport=transport)


def resume_experiment(out: str | Path, progress: bool | None = None, extend: int = 0,
                      eps: float | None = None) -> Experiment:
    return Experiment.resume(out, progress=progress, extend=extend, eps=eps)


def run_experiment(cfg: Config, out: str | Path, progress: bool = False) -> RunOutcome:
    """Programmatic entry point (scripts, tests)."""
    return make_experiment(cfg, out, progress=progress).run()
