"""The round driver (DESIGN.md, "One round, as the data flows").

Per iteration: local training -> updates clipped to tau, normalised payload u_i/tau -> channels drawn
(block fading) -> power policy plans the round (alpha_i, alpha_u, alpha_cj) -> the ledger checks the
budget and RECORDS the round's mechanism (fsync'ed) -> the air carries the round -> the server step
releases the new global model -> metrics, checkpoint. A lost burst is retried ``air.retries`` times
with fresh noise, then the round is skipped (its privacy spend stays counted)."""
from __future__ import annotations

import dataclasses
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import results, seeding
from .channel.fading import BlockFading
from .config import Config, load_config, to_toml
from .errors import AirError, BudgetExceeded, UserError
from .power.base import PowerPolicy, SystemInfo
from .noise_source import describe as noise_source_description, protective_rng
from .privacy.ledger import genesis
from .privacy.sensitivity import basis, payload_bounds_for
from .registry import AIRS, ALGORITHMS, POWER_POLICIES, load_plugins
from .transmission import Mechanism, aggregate_nmse, aggregate_nmse_theory

CHECKPOINT = "checkpoint.pt"
# figures in rounds.jsonl computed by the experimenter from unprotected data (all clients' training data,
# the noiseless aggregate, clipping flags): for evaluation only, never released by the mechanism nor sent
# by the testbed's clients (outside net.diagnostics)
EVALUATION_FIELDS = ("train_loss", "local_train_loss", "aggregate_nmse", "aggregate_nmse_theory",
                     "clipped_fraction", "max_power_ratio")


def snr_to_power(snr_db: float, dim: int, sigma_c2: float) -> float:
    """P_i from SNR_i = P_i / (d sigma_c2) (paper 000, sec. V)."""
    return float(10 ** (snr_db / 10) * dim * sigma_c2)


@dataclass
class RunOutcome:
    summary: dict
    out: Path
    stopped_reason: str = ""


class Experiment:
    """One FL run. ``Experiment(cfg, out).run()``; ``Experiment.resume(out).run()`` continues from the
    last checkpoint with the ledger intact."""

    def __init__(self, cfg: Config, out: str | Path, resume: bool = False, progress: bool | None = None):
        load_plugins()
        self.cfg = cfg
        self.out = results.prepare_out_dir(Path(out), resume=resume)
        results.lock_out_dir(self.out)                  # one writer per results folder
        self.resuming = resume
        self.progress = cfg.run.progress if progress is None else progress
        if not resume:
            results.atomic_write_text(self.out / "config.toml", to_toml(cfg))

    @classmethod
    def resume(cls, out: str | Path, progress: bool | None = None) -> "Experiment":
        out = Path(out)
        if not (out / "config.toml").is_file():
            raise UserError(f"cannot resume: '{out}' holds no config.toml (not a results folder)")
        cfg = load_config(out / "config.toml")
        return cls(cfg, out, resume=True, progress=progress)

    # ------------------------------------------------------------------------------------------
    def _build(self):
        from .learning.federated_data import load_federated
        from .learning.models import build_model
        from .learning.trainer import LocalTrainer
        from .privacy.ledger import PrivacyLedger

        cfg = self.cfg
        torch.set_num_threads(cfg.run.torch_threads)
        self.data = load_federated(cfg)
        model = build_model(cfg, self.data.input_shape, self.data.num_classes)
        self.trainer = LocalTrainer(cfg, self.data, model)
        self.dim = self.trainer.dim
        self.K = len(self.data.sizes)
        self.algorithm = ALGORITHMS.get(cfg.algorithm.name)(cfg)
        self.air, self._session_cal = None, None
        if cfg.calibration.session:
            self._calibrate_in_session(("noise", "channel", "power")   # opens the radios, before any plan
                                       + (("jammer",) if cfg.power.jammer else ()))
        self.csi = self._csi_provider()
        # powers in the units of the noise: the config's (sim, loopback), else the measured noise floor, so a
        # calibrated air's plan is in the capture's (DAC-referred) units
        noise_unit = float(cfg.channel.sigma_c2) if self.csi is None else float(self.csi.sigma_c2)
        power = snr_to_power(cfg.power.max_snr_db, self.dim, noise_unit)
        self.info = SystemInfo(
            p=np.asarray(self.data.p, dtype=float), sizes=np.asarray(self.data.sizes, dtype=float),
            power=np.full(self.K, power), dim=self.dim, sigma_c2=self._ledger_sigma_c2(), rounds=cfg.run.rounds,
            eps=cfg.privacy.eps, delta=cfg.privacy.delta, unit=cfg.privacy.unit,
            jammer_power=snr_to_power(cfg.power.jammer_max_snr_db, self.dim, noise_unit),
            bound=payload_bounds_for(cfg, self.data.sizes, mu=float(self.algorithm.local_mu)))
        self.policy = POWER_POLICIES.get(cfg.power.policy)(cfg, self.info, cfg.power.options)
        self.policy.attach(self)       # policies that need run context (data, trainer) take it here
        ledger_path = self.out / "privacy_ledger.jsonl"
        chain = genesis(to_toml(cfg))                # the ledger's hash chain starts from the config
        if self.resuming and ledger_path.exists():
            self.ledger = PrivacyLedger.resume(cfg.privacy, ledger_path, genesis_hash=chain)
        else:
            self.ledger = PrivacyLedger(cfg.privacy, ledger_path, genesis_hash=chain)
        self.fading = BlockFading(cfg.channel.fading)
        self.jammer_fading = BlockFading(cfg.channel.jammer_fading)
        try:
            self.calibration = self._calibrate_privacy()   # before round 1: unreachable targets refused here
        except BaseException:
            self._abandon_start()                          # nothing was run: no folder left behind
            raise
        if self.air is None:
            self.air = AIRS.get(cfg.air.name)(cfg)

    def _calibrate_in_session(self, steps: tuple) -> None:
        """calibration.session: measure with the run's own open radios (the LO phase changes whenever a
        radio is tuned, so a calibration from another session is stale) into DIR/calibration.json, and
        let the air pre-compensate with it. A failure before round 1 removes a new run's folder."""
        import sys

        from .calibration.session import run_calibration
        from .radio.calibration_flowgraphs import make_link
        first = self.air is None
        if first:
            self.air = make_link(self.cfg, "uhd")
        path = self.out / "calibration.json"
        echo = (lambda m: print(f"[calibration] {m}", file=sys.stderr)) if self.progress else (lambda m: None)
        try:
            run_calibration(self.cfg, steps, path, air="uhd", link=self.air, echo=echo)
        except BaseException:
            if first:
                self._abandon_start()
            raise
        self._session_cal = path
        self.air.use_calibration(path)

    def _calibrate_privacy(self) -> dict:
        """privacy.calibrate: "paper" keeps the policy's own rule; "target" solves the policy's one privacy
        knob so that the planned data-using rounds (Upcycled-FL's server-only iterations are free) spend
        privacy.eps within 1 % and never above (privacy/target.py), by the tight accountant: the algorithm's
        noise knob (paper 002), else the policy's own ``calibrate_to`` (paper 000), else the policy's
        ``privacy_knob`` solved by planning the rounds (privacy/knob_target.py). A mechanism with none of
        them keeps its own rule (reported). Returns the summary's fields."""
        from .privacy.target import calibration_accountant, planned_epsilon, solve
        cfg, pr = self.cfg, self.cfg.privacy
        if pr.calibrate == "paper":
            return {"calibration": "paper rule"}
        if self.algorithm.noise_knob:                   # paper 002: the clients' noise sigma is the knob
            return self._calibrate_client_noise()
        knob = self.policy.privacy_knob()
        if knob is not None:
            return self._calibrate_knob(knob)
        if type(self.policy).calibrate_to is PowerPolicy.calibrate_to:
            return {"calibration": f"policy rule (power policy '{cfg.power.policy}' has no target calibration)"}
        if cfg.air.name == "uhd" and cfg.power.jammer:
            raise UserError("privacy.calibrate = 'target' with a jammer on the uhd air is not supported (the ledger "
                            "counts the calibrated jammer path): set power.jammer = false or privacy.calibrate = 'paper'")
        its = [it for it in range(1, self.algorithm.iterations(cfg.run.rounds) + 1) if self.algorithm.uses_clients(it)]
        q = float(getattr(self.policy, "sampling_prob", 1.0))
        target = solve(pr.eps, pr.delta, len(its), calibration_accountant(pr.accountant), q)
        margin = 1.0 if self.csi is None else float(np.max(self.csi.gain_margin()))
        if not np.isfinite(margin):
            raise UserError("the calibration's channel estimates are too uncertain to bound the clients' gains "
                            "(h_std >= |h| / 3); recalibrate with more pilot energy")
        planned = {}
        for it in its:                               # the run's seeded channels: what the rounds will see
            h, h_cj = self._draw_channels(it)
            planned[it] = (h if self.csi is None else self.csi.estimates(it, h), h_cj)
        fields = self.policy.calibrate_to(target, planned, margin)
        if pr.enforce and pr.accountant != target.accountant:
            spent = planned_epsilon(pr.accountant, target.noise_multiplier, target.rounds, pr.delta, q)
            if spent > pr.eps:
                raise UserError(f"privacy.accountant = '{pr.accountant}' would stop the run: it bounds the mechanism "
                                f"calibrated to privacy.eps = {pr.eps:g} by '{target.accountant}' at {spent:.4g}; "
                                f"enforce with pld or rdp, or set privacy.enforce = false")
        return fields

    def _planned_channels(self, its: list) -> dict:
        """{iteration: (h, csi, h_cj)}: the run's seeded channels of the planned rounds, as round 1.. will see them."""
        out = {}
        for it in its:
            h, h_cj = self._draw_channels(it)
            out[it] = (h, None if self.csi is None else self.csi.estimates(it, h), h_cj)
        return out

    def _calibrate_knob(self, knob) -> dict:
        """privacy.calibrate = "target" through the policy's PrivacyKnob: for a candidate value, a copy of the
        policy plans every data-using round on the run's seeded channels (zero payload: the ledger's mechanism
        does not depend on the data) and the planned mechanisms, restated as the ledger will record them
        (CSI margins), are composed by the tight accountant; the value is bisected (privacy/knob_target.py)
        and set on the real policy. A knob also set by hand is refused: which one wins is not guessed."""
        import copy

        from .privacy.knob_target import solve_knob
        from .privacy.target import calibration_accountant
        cfg, pr = self.cfg, self.cfg.privacy
        for name in (knob.name, *knob.hand_keys):
            section, _, key = name.rpartition(".")
            if section == "power.options" and key in (cfg.power.options or {}):
                what = "" if name == knob.name else f" (it sets {knob.name})"
                raise UserError(f"{name} is set by hand{what} and privacy.calibrate = 'target' would solve "
                                f"{knob.name} for privacy.eps = {pr.eps:g}: remove one (set privacy.calibrate = "
                                f"'paper' to keep your value)")
        its = [it for it in range(1, self.algorithm.iterations(cfg.run.rounds) + 1) if self.algorithm.uses_clients(it)]
        channels = self._planned_channels(its)
        zeros = np.zeros((self.K, int(self.info.dim)))            # the payload's size (C^2 for paper 003)

        def rounds_at(value: float) -> list:
            policy = copy.deepcopy(self.policy, {id(self): self})     # the real policy starts untouched
            policy.privacy_knob().set(value)
            rounds = []
            for it in its:
                h, csi, h_cj = channels[it]
                plan = policy.plan(it, zeros, h, h_cj, seeding.rng(cfg.run.seed, "calibration_plan", it), csi=csi)
                m = plan.mechanism if self.csi is None else self._csi_safe(plan)
                if m.uses_data and m.sensitivity > 0:
                    rounds.append((m.noise_multiplier, float(min(m.sampling_prob, 1.0))))
            return rounds

        acc = calibration_accountant(pr.accountant)
        cal = solve_knob(pr.eps, pr.delta, acc, knob, rounds_at)
        knob.set(cal.value)
        if pr.enforce and pr.accountant != acc:
            from .learning.noisy_target import compose
            spent = compose(pr.accountant, rounds_at(cal.value), pr.delta)
            if spent > pr.eps:
                raise UserError(f"privacy.accountant = '{pr.accountant}' would stop the run: it bounds the mechanism "
                                f"calibrated to privacy.eps = {pr.eps:g} by '{acc}' at {spent:.4g}; enforce with pld "
                                f"or rdp, or set privacy.enforce = false")
        return cal.summary(acc)

    def _calibrate_client_noise(self) -> dict:
        """privacy.calibrate = "target" for paper 002's Noisy-FedAvg/FedProx: the power policy keeps its own
        rule and is planned (on a copy, zero payload) on the run's seeded channels of the data-using rounds;
        the clients' noise std sigma (algorithm.options.sigma) is then solved so the ledger's rounds spend
        the target (learning/noisy_target.py). Returns the summary's fields."""
        import copy

        from .learning.noisy_target import PlannedRound, planned_epsilon, solve_sigma
        from .privacy.target import calibration_accountant
        cfg, pr, alg = self.cfg, self.cfg.privacy, self.algorithm
        key = str(alg.noise_knob).rpartition(".")[2]
        if key in (cfg.algorithm.options or {}):
            raise UserError(f"{alg.noise_knob} is set by hand and privacy.calibrate = 'target' would solve it for "
                            f"privacy.eps = {pr.eps:g}: remove one (set privacy.calibrate = 'paper' to keep your value)")
        if self.csi is not None:
            margin = float(np.max(self.csi.gain_margin()))
            if not np.isfinite(margin):
                raise UserError("the calibration's channel estimates are too uncertain to bound the clients' gains "
                                "(h_std >= |h| / 3); recalibrate with more pilot energy")
        its = [it for it in range(1, alg.iterations(cfg.run.rounds) + 1) if alg.uses_clients(it)]
        policy = copy.deepcopy(self.policy, {id(self): self})   # stateful policies: the real one starts untouched
        zeros = np.zeros((self.K, int(self.dim)))
        planned = []
        for it in its:
            h, h_cj = self._draw_channels(it)
            csi = None if self.csi is None else self.csi.estimates(it, h)
            plan = policy.plan(it, zeros, h, h_cj, seeding.rng(cfg.run.seed, "calibration_plan", it), csi=csi)
            _, gains, _, _, sens, sigma_air = alg.round_terms(plan, it)
            finish = None
            if self.csi is not None:                      # the ledger's CSI-safe restatement (_csi_safe)
                def finish(d, s, plan=plan):
                    plan.mechanism = dataclasses.replace(plan.mechanism, sensitivity=d, sigma_eff=s)
                    m = self._csi_safe(plan)
                    return m.sensitivity, m.sigma_eff
            planned.append(PlannedRound(sens=sens, sigma_air=sigma_air, gain_sq=float(np.sum(gains ** 2)),
                                        q=float(plan.mechanism.sampling_prob), tau=alg.tau, finish=finish))
        acc = calibration_accountant(pr.accountant)
        cal = solve_sigma(pr.eps, pr.delta, acc, planned)
        if pr.enforce and pr.accountant != acc:
            spent = planned_epsilon(pr.accountant, planned, cal.sigma, pr.delta)
            if spent > pr.eps:
                raise UserError(f"privacy.accountant = '{pr.accountant}' would stop the run: it bounds the client "
                                f"noise calibrated to privacy.eps = {pr.eps:g} by '{acc}' at {spent:.4g}; enforce "
                                f"with pld or rdp, or set privacy.enforce = false")
        alg.options.sigma = cal.sigma
        q = min((p.q for p in planned), default=1.0)
        return cal.summary(pr.eps, pr.delta, acc, len(its), q)

    def _ledger_sigma_c2(self) -> float:
        """The channel noise the server may count on for privacy. With perfect CSI: the config's value
        (loopback/sim know it). With a calibration file: the measured noise floor, lowered by two
        standard errors, so that an estimation error cannot overstate the privacy of a round."""
        if self.csi is None:
            return float(self.cfg.channel.sigma_c2)
        lower = self.csi.sigma_c2 - 2.0 * getattr(self.csi, "sigma_c2_std", 0.0)
        return float(max(lower, 1e-3 * self.csi.sigma_c2))

    def _csi_provider(self):
        if self.cfg.air.csi == "perfect":
            return None
        try:
            from .calibration.data import CalibratedCsi
        except ImportError:
            raise UserError("air.csi = 'calibrated' needs the calibration module, which is not installed") from None
        return CalibratedCsi.for_run(self.cfg, self.K, self._session_cal)

    # ------------------------------------------------------------------------------------------
    def _save_checkpoint(self, it: int, w, w_prev, rows_done: int):
        """Tensors and plain data only (loaded with weights_only=True: nothing in a results folder runs
        code), with the ledger's entry count and head hash and the config's hash."""
        state = {"iteration": it, "w": w, "w_prev": w_prev, "rows": rows_done,
                 "policy": results.to_plain(self.policy.state_dict()),
                 "ledger_count": self.ledger.rounds_recorded, "ledger_head": self.ledger.head,
                 "config_hash": genesis(to_toml(self.cfg))}
        results.atomic_torch_save(state, self.out / CHECKPOINT)

    def _load_checkpoint(self):
        path = self.out / CHECKPOINT
        if not path.exists():
            return None
        try:
            ck = torch.load(path, weights_only=True)
        except Exception as e:  # noqa: BLE001 - a corrupt or unsafe checkpoint is a user-facing error
            raise UserError(f"checkpoint '{path}' is unreadable or holds more than tensors and plain data "
                            f"({type(e).__name__}); refusing to load it") from None
        if not isinstance(ck, dict) or not {"iteration", "w", "w_prev"} <= set(ck):
            raise UserError(f"checkpoint '{path}' is not an otafl-sdr checkpoint")
        ck["policy"] = results.from_plain(ck.get("policy"))
        self._check_ledger_against(ck, path)
        return ck

    def _check_ledger_against(self, ck: dict, path) -> None:
        """--resume refuses a folder whose ledger is missing, shorter than the checkpoint says, rewritten,
        or whose config changed since the checkpoint (exit 2): a damaged ledger must never under-count."""
        ledger_file = self.out / "privacy_ledger.jsonl"
        if ck.get("config_hash") != genesis(to_toml(self.cfg)):
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

    def _draw_channels(self, it: int):
        g = seeding.rng(self.cfg.run.seed, "channel", it)
        h = self.fading(g, self.K)
        h_cj = complex(self.jammer_fading(g, 1)[0])
        if self.cfg.air.name == "uhd" and getattr(self, "csi", None) is not None:
            est = self.csi.jammer_estimate(h_cj)     # a lab's jammer path is the calibrated one, not a draw
            if est is not None:
                h_cj = est
        return h, h_cj

    # ------------------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        t_start = time.perf_counter()
        try:
            self._build()
        except BaseException:
            self._abandon_start()          # refused before round 1: a new run leaves no folder behind
            raise
        cfg = self.cfg
        tau = cfg.train.tau
        n_it = self.algorithm.iterations(cfg.run.rounds)
        w = self.trainer.get_flat().detach().clone()
        w_prev = w.clone()
        start = 1
        ck = self._load_checkpoint() if self.resuming else None
        if ck is not None:
            w, w_prev, start = ck["w"], ck["w_prev"], ck["iteration"] + 1
            if ck.get("policy") is not None:
                self.policy.load_state_dict(ck["policy"])
        log = results.RoundLog(self.out / "rounds.jsonl", keep_until=start - 1 if self.resuming else None)
        prior_wall = sum(r.get("wall_s", 0.0) or 0.0 for r in log.rows)
        stopped = ""
        dead_notes: list[str] = []
        self._start_air()
        bar = None
        if self.progress:
            from tqdm import tqdm
            bar = tqdm(total=n_it, initial=start - 1, desc=f"{cfg.run.name} [{cfg.air.name}]", unit="round",
                       dynamic_ncols=True)
        try:
            for it in range(start, n_it + 1):
                every = cfg.air.recalibrate_every
                if every and it > start and (it - 1) % every == 0:     # fresh channel estimates (phase drifts)
                    self._calibrate_in_session(("channel",))
                    self.csi = self._csi_provider()
                t0 = time.perf_counter()
                self._evaluate_now = it % cfg.run.eval_every == 0 or it == n_it   # run.eval_every
                row = self._iteration(it, w, w_prev, tau, dead_notes)
                if row.pop("_stop", None):
                    stopped = row.pop("_stop_reason")
                    break
                w_new = row.pop("_w")
                w_prev, w = w, w_new
                row["wall_s"] = time.perf_counter() - t0
                log.append(row)
                if it % cfg.run.checkpoint_every == 0 or it == n_it:
                    self._save_checkpoint(it, w, w_prev, len(log.rows))
                if getattr(self, "on_round", None) is not None:
                    self.on_round(dict(log.rows[-1]))          # the API's per-round callback
                if bar is not None:
                    bar.update(1)
                    eps = row.get(f"eps_{cfg.privacy.accountant}")
                    bar.set_postfix(acc=f"{row['test_accuracy']:.3f}" if row.get("test_accuracy") is not None else "-",
                                    eps=f"{eps:.3g}" if isinstance(eps, float) else "-")
        except KeyboardInterrupt:
            stopped = "interrupted (Ctrl-C); resume with --resume"
        except AirError as e:
            stopped = f"radio failure: {e}"
        finally:
            if bar is not None:
                bar.close()
            self.air.close()
        summary = self._summary(log.rows, prior_wall + 0.0, t_start, stopped, dead_notes)
        results.write_summary(self.out, summary)
        results.plot_rounds(self.out, log.rows, summary)
        results.unlock_out_dir(self.out)
        return RunOutcome(summary=summary, out=self.out, stopped_reason=stopped)

    def _start_air(self) -> None:
        """Open the radios; a failure (no USRP, a refused setting) ends the run before its first round with the
        air's one-line error, and a new run's folder is removed (it holds nothing but its config)."""
        try:
            self.air.start()
        except BaseException:
            self._abandon_start()
            raise

    def _abandon_start(self) -> None:
        """Close the radios; a new run's folder (nothing in it but its config) is removed."""
        if getattr(self, "air", None) is not None:
            self.air.close()
        out = getattr(self, "out", None)                 # a node's context has no results folder
        if out is not None:
            results.unlock_out_dir(out)
            if not self.resuming:
                shutil.rmtree(out, ignore_errors=True)

    def _iteration(self, it: int, w, w_prev, tau, notes) -> dict:
        cfg = self.cfg
        row: dict = {"round": it, "client_round": self.algorithm.client_round(it)}
        if not self.algorithm.uses_clients(it):
            # server-only step (Upcycled-FL even iteration): no client data, no privacy cost (Lemma 1)
            mech = Mechanism(round=it, sensitivity=0.0, sigma_eff=0.0, uses_data=False)
            eps = self.ledger.record(mech)
            w_new = self.algorithm.server_only_step(w, w_prev, it)
            row.update(self._metrics(w_new, train_loss=None))
            row.update({"sensitivity": 0.0, "sigma_eff": 0.0, "alpha_u": None, "cj_active": False, "cj_power": 0.0,
                        "aggregate_nmse": None, "aggregate_nmse_theory": None, "uses_clients": False,
                        "lost": False})
            row.update(self._eps_fields(eps))
            row["_w"] = w_new
            return row

        tr = self.algorithm.local_train(self.trainer, w, it)
        updates = tr.updates.detach().to(torch.float64).numpy()
        payload = updates / tau                                    # ||u_i / tau|| <= 1
        bad = ~np.isfinite(payload).all(axis=1)
        if bad.any():
            payload = np.where(bad[:, None], 0.0, payload)
            notes.append(f"round {it}: clients {np.flatnonzero(bad).tolist()} held NaN/inf and did not transmit")
        h, h_cj = self._draw_channels(it)
        csi = None if self.csi is None else self.csi.estimates(it, h)
        plan = self.policy.plan(it, payload, h, h_cj, protective_rng(cfg, "policy", it), csi=csi)
        plan.extra.setdefault("csi", h if csi is None else csi)     # what the clients believed (airs use it)
        plan.extra["air_sigma_c2"] = cfg.channel.sigma_c2           # the emulated channel's true noise (sim, loopback)
        if bad.any():
            plan.alpha = np.where(bad, 0, plan.alpha)
            plan.mode = ["silent" if b else m for m, b in zip(plan.mode, bad)]
        self.algorithm.finish_plan(plan, tr, it)                   # client noise + the round's mechanism (paper 002)
        if self.csi is not None:
            plan.mechanism = self._csi_safe(plan)
        mapping = self.air.preflight(plan)                         # the radios can carry it, before accounting
        try:
            self.ledger.check(plan.mechanism)
        except BudgetExceeded as e:
            return {"_stop": True, "_stop_reason": str(e)}
        rec, attempts, eps = self._release_and_transmit(plan, it, notes)
        self.policy.observe(it, rec.aggregate if rec.ok else None)   # feedback (LAPA's PID error, eq. 10 of paper 004)
        expected = plan.expected_aggregate()
        if rec.ok:
            agg = torch.as_tensor(rec.aggregate * tau, dtype=w.dtype)
            w_new = self.algorithm.server_step(w, agg, it)
            nmse = aggregate_nmse(rec.aggregate, expected)
        else:
            w_new = w.clone()                                        # lost round: model unchanged
            nmse = None
            notes.append(f"round {it}: lost after {attempts} attempt(s): {rec.reason}")
        row.update(self._metrics(w_new, train_loss=tr.train_loss))
        row.update({
            "sensitivity": plan.mechanism.sensitivity, "sigma_eff": plan.mechanism.sigma_eff,
            "alpha_u": plan.alpha_u, "cj_active": bool(plan.alpha_cj > 0),
            "cj_power": float(plan.alpha_cj ** 2 * plan.dim), "cj_capped": bool(plan.extra.get("cj_capped", False)),
            "aggregate_nmse": nmse,
            "aggregate_nmse_theory": aggregate_nmse_theory(plan), "uses_clients": True,
            "lost": not rec.ok, "lost_reason": rec.reason if not rec.ok else "", "attempts": attempts,
            "faults": rec.faults, "channel_uses": rec.channel_uses, "air_s": rec.wall_s,
            "transmitting": int(sum(m != "silent" for m in plan.mode)),
            "clipped_fraction": float(np.mean(tr.clipped)) if tr.clipped is not None else None,
            "max_power_ratio": float(np.max(plan.transmit_energy() / plan.power_limit))
            if plan.power_limit is not None else None,
        })
        row.update(mapping)
        row.update(self._eps_fields(eps))
        row["_w"] = w_new
        return row

    def _csi_safe(self, plan):
        """With estimated CSI the ledger cannot take the planned gains at their word: a client pre-inverting
        with h_hat_i arrives with up to ``gain_margin`` times the planned gain (3-sigma bound of the
        calibration), so the sensitivity is scaled by the largest margin; on the uhd air the jammer's path
        is not the simulated h_cj but the calibrated one, counted at its lower 3-sigma bound; where the air
        measured the jammer's delivered noise (``Air.delivered_jammer_gain``), the ledger counts the smaller of
        that and the plan's jammer noise (privacy/delivered_jammer.py), recorded as ``extra["jammer_noise"]``."""
        m = plan.mechanism
        if not m.uses_data:
            return m
        margin = float(np.max(self.csi.gain_margin()))
        if not np.isfinite(margin):
            raise UserError("the calibration's channel estimates are too uncertain to bound the clients' gains "
                            "(h_std >= |h| / 3); recalibrate with more pilot energy")
        sigma = m.sigma_eff
        extra = {**m.extra, "csi_gain_margin": margin}
        jam = (abs(plan.h_cj) * plan.alpha_cj / plan.alpha_u) ** 2 if plan.alpha_cj > 0 else 0.0
        if self.cfg.air.name == "uhd" and plan.alpha_cj > 0:
            jam_cal = (self.csi.jammer_lower() * plan.alpha_cj / plan.alpha_u) ** 2
            sigma = float(np.sqrt(max(sigma ** 2 - jam, 0.0) + jam_cal))
            extra["jammer_gain_lower"] = self.csi.jammer_lower()
            jam = jam_cal
        gain = self.air.delivered_jammer_gain() if plan.alpha_cj > 0 and self.air is not None else None
        if gain is not None:                       # the jammer's delivered noise, measured: min(planned, measured)
            from .privacy.delivered_jammer import book_jammer_noise
            sigma, extra["jammer_noise"] = book_jammer_noise(sigma, jam, gain, plan.alpha_cj, plan.alpha_u)
        return dataclasses.replace(m, sensitivity=m.sensitivity * margin, sigma_eff=min(sigma, m.sigma_eff),
                                   extra=extra)

    def _release_and_transmit(self, plan, it: int, notes: list) -> tuple:
        """Record the round's mechanism (BEFORE anything is released), then let the air carry it,
        retrying a lost burst ``air.retries`` times. Returns (reception, attempts, eps)."""
        cfg = self.cfg
        eps = self.ledger.record(plan.mechanism)
        rec, attempts = None, 0
        for attempt in range(cfg.air.retries + 1):
            if attempt > 0:
                # a retry re-transmits the same updates with fresh noise: a further release, so it is
                # accounted as its own mechanism (and refused if it would exceed the budget)
                retry = dataclasses.replace(plan.mechanism, extra={**plan.mechanism.extra, "attempt": attempt})
                if cfg.privacy.enforce and self.ledger.would_exceed(retry):
                    notes.append(f"round {it}: retry {attempt} skipped, it would exceed the privacy budget")
                    break
                eps = self.ledger.record(retry)
            attempts = attempt + 1
            rec = self.air.transmit(plan, protective_rng(cfg, "noise", it, attempt))
            self._record_iq(rec, plan, attempt)
            if rec.ok:
                break
        return rec, attempts, eps

    def _record_iq(self, rec, plan, attempt: int) -> None:
        """SigMF recording of the received burst (air.record_iq): airs put it in Reception.extra."""
        iq = rec.extra.pop("iq", None)
        meta = rec.extra.pop("iq_meta", None)
        if iq is None or not self.cfg.air.record_iq:
            return
        from .radio.recording import Recorder
        if not hasattr(self, "_recorder"):
            self._recorder = Recorder(self.out / "iq")
        self._recorder.record(plan.round, iq, meta or {}, attempt)

    def _metrics(self, w, train_loss) -> dict:
        """Evaluation-side figures (test set; the global training loss reads every client's data, so it is
        for the experimenter, never released by the mechanism). Every ``run.eval_every`` iterations and at
        the last one; None in between (full-data evaluation is a large share of a small round)."""
        if not getattr(self, "_evaluate_now", True):
            return {"test_accuracy": None, "test_loss": None, "train_loss": None, "local_train_loss": train_loss}
        acc, test_loss = self.trainer.evaluate(w)
        gl = self.trainer.global_train_loss(w)
        return {"test_accuracy": acc, "test_loss": test_loss, "train_loss": gl,
                "local_train_loss": train_loss}

    @staticmethod
    def _eps_fields(eps: dict) -> dict:
        return {f"eps_{k}": v for k, v in eps.items()}

    def _summary(self, rows, prior_wall, t_start, stopped, notes) -> dict:
        cfg = self.cfg
        last = next((r for r in reversed(rows) if r.get("test_accuracy") is not None), {})   # last evaluated
        eps = {f"eps_{k}": v for k, v in self.ledger.epsilons().items()}
        return {
            "final_accuracy": last.get("test_accuracy"), "final_loss": last.get("train_loss"),
            "final_accuracy_round": last.get("round"),
            **eps, "delta": cfg.privacy.delta, "rounds": len(rows),
            "rounds_planned": self.algorithm.iterations(cfg.run.rounds),
            "client_rounds": sum(1 for r in rows if r.get("uses_clients")),
            "clients": self.K, "model_dim": self.dim, "wall_s": prior_wall + (time.perf_counter() - t_start),
            "air": cfg.air.name, "algorithm": cfg.algorithm.name, "power_policy": cfg.power.policy,
            "run_name": cfg.run.name,
            "dataset": cfg.data.dataset, "seed": cfg.run.seed, "device": str(getattr(self.trainer, "device", "cpu")), "eps_target": cfg.privacy.eps,
            "privacy_unit": cfg.privacy.unit, "sensitivity_basis": basis(cfg.privacy.unit),
            "noise_source": noise_source_description(cfg.air.name),
            "evaluation_fields": list(EVALUATION_FIELDS),
            "max_payload_bound": float(np.max(self.info.payload_bound())),
            "jammer_rounds": sum(1 for r in rows if r.get("cj_active")),
            "capped_jammer_rounds": sum(1 for r in rows if r.get("cj_capped")),
            "lost_rounds": sum(1 for r in rows if r.get("lost")),
            **privacy_verdicts(eps, cfg.privacy.eps),
            **getattr(self, "calibration", {"calibration": "policy rule (no target calibration)"}),
            "stopped_reason": stopped, "notes": notes,
            **({"devices": self.air.describe()} if self.air.describe() else {}),
        }


def privacy_verdicts(eps: dict, target: float) -> dict:
    """Honest reporting (issue 14): ``over_target`` when the tight (PLD) epsilon spent exceeds the target,
    and ``eps_NAME_valid`` False where a paper's closed form (``CLOSED_FORMS``: paper 000's, paper 001's
    Theorem 1, paper 003's Theorem 2, paper 004's budget sum) came out below the exact PLD value of the same
    mechanism (then it is not a valid bound)."""
    from .privacy.base import CLOSED_FORMS
    pld = eps.get("eps_pld")
    out = {"over_target": bool(pld is not None and pld > target)}
    for name in CLOSED_FORMS:        # eps_paper_valid, eps_otafd_valid, ...
        v = eps.get(f"eps_{name}")
        if pld is not None and v is not None:
            out[f"eps_{name}_valid"] = bool(v >= pld)
    return out


def experiment_class(cfg: Config) -> type:
    """An algorithm whose round is not "train, aggregate updates, step" (e.g. federated distillation)
    names its own Experiment subclass as ``experiment_class``; the others use Experiment."""
    load_plugins()
    algo = ALGORITHMS.get(cfg.algorithm.name)
    cls = algo.experiment_class
    if isinstance(cls, str):
        import importlib
        module, attr = cls.split(":")
        cls = getattr(importlib.import_module(module), attr)
    return cls or Experiment


def make_experiment(cfg: Config, out: str | Path, resume: bool = False, progress: bool | None = None):
    return experiment_class(cfg)(cfg, out, resume=resume, progress=progress)


def resume_experiment(out: str | Path, progress: bool | None = None):
    out = Path(out)
    if not (out / "config.toml").is_file():
        raise UserError(f"cannot resume: '{out}' holds no config.toml (not a results folder)")
    cfg = load_config(out / "config.toml")
    return make_experiment(cfg, out, resume=True, progress=progress)


def run_experiment(cfg: Config, out: str | Path, progress: bool = False) -> RunOutcome:
    """Programmatic entry point (scripts, tests)."""
    return make_experiment(cfg, out, progress=progress).run()


def finite_or_none(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None
