"""The round driver of algorithm ``otafd`` (paper 003): an ``Experiment`` whose state is the K devices' own
models (a (K, d) tensor in place of the global model) and whose payload is C^2 numbers per device.

Per round (``_iteration``): payload q_i (``DeviceModels.payload``) -> channels (block fading) -> the
transceiver ``otafd_prop1`` plans the round (Proposition 1) -> the ledger checks and RECORDS the round's
mechanism (fsync'ed) BEFORE the devices see the targets (the release) -> the air carries the round (a
lost burst is retried ``air.retries`` times with fresh noise, each retry a further release) -> received
targets r^k -> local distillation training -> metrics (mean / min / max test accuracy over devices),
checkpoint. Everything else (resume, progress bar, rounds log, summary) is ``Experiment``'s."""
from __future__ import annotations


import numpy as np
import torch

from .noise_source import protective_rng
from . import seeding
from .channel.fading import BlockFading
from .errors import BudgetExceeded, ConfigError
from .orchestrator import CHECKPOINT, Experiment, snr_to_power
from .power.base import SystemInfo
from .registry import AIRS, ALGORITHMS, POWER_POLICIES
from .transmission import aggregate_nmse

POLICY = "otafd_prop1"


class OtafdExperiment(Experiment):
    """``OtafdExperiment(cfg, out).run()``; picked by ``make_experiment`` through ``Otafd.experiment_class``."""

    def _build(self):
        from .learning.federated_data import load_federated
        from .learning.models import build_model
        from .learning.otafd import DeviceModels, Otafd
        from .privacy.ledger import PrivacyLedger

        cfg = self.cfg
        torch.set_num_threads(cfg.run.torch_threads)
        self.algorithm = ALGORITHMS.get(cfg.algorithm.name)(cfg)
        if not isinstance(self.algorithm, Otafd):
            raise ConfigError("algorithm.name", f"OtafdExperiment runs algorithm 'otafd', not '{cfg.algorithm.name}'")
        if cfg.power.policy != POLICY:
            raise ConfigError("power.policy", f"algorithm 'otafd' needs its transceiver '{POLICY}', "
                                              f"got '{cfg.power.policy}'")
        self.data = load_federated(cfg)
        model = build_model(cfg, self.data.input_shape, self.data.num_classes)
        self.trainer = DeviceModels(cfg, self.data, model, gamma=self.algorithm.options.gamma)
        self.dim = self.trainer.dim                            # model size (per device)
        self.C = int(self.data.num_classes)
        self.payload_dim = self.C * self.C                     # what goes over the air
        self.K = len(self.data.sizes)
        self.label_counts = self.trainer.counts
        power = snr_to_power(cfg.power.max_snr_db, self.payload_dim, cfg.channel.sigma_c2)
        self.info = SystemInfo(
            p=np.asarray(self.data.p, dtype=float), sizes=np.asarray(self.data.sizes, dtype=float),
            power=np.full(self.K, power), dim=self.payload_dim, sigma_c2=cfg.channel.sigma_c2,
            rounds=cfg.run.rounds, eps=cfg.privacy.eps, delta=cfg.privacy.delta, unit=cfg.privacy.unit,
            jammer_power=0.0)
        self.policy = POWER_POLICIES.get(cfg.power.policy)(cfg, self.info, cfg.power.options)
        self.policy.attach(self)
        self.algorithm.design_rounds = self.policy.T if self.policy.options.rounds == "prop2" else None
        ledger_path = self.out / "privacy_ledger.jsonl"
        from .config import to_toml
        from .privacy.ledger import genesis
        chain = genesis(to_toml(cfg))                # the ledger's hash chain starts from the config
        if self.resuming and ledger_path.exists():
            self.ledger = PrivacyLedger.resume(cfg.privacy, ledger_path, genesis_hash=chain)
        else:
            self.ledger = PrivacyLedger(cfg.privacy, ledger_path, genesis_hash=chain)
        self.fading = BlockFading(cfg.channel.fading)
        self.jammer_fading = BlockFading(cfg.channel.jammer_fading)
        self.csi = self._csi_provider()
        self.calibration = self._calibrate_privacy()      # the design's z* for the target, before round 1
        self.air = AIRS.get(cfg.air.name)(cfg)
        if not hasattr(self, "_last_targets"):
            self._last_targets = None

    # -- checkpoint: the device models plus the last received targets --------------------------------
    def _save_checkpoint(self, it: int, w, w_prev, rows_done: int):
        from .privacy.ledger import genesis
        from .config import to_toml
        from .results import atomic_torch_save, to_plain
        state = {"iteration": it, "w": w, "w_prev": w_prev, "rows": rows_done, "policy": None,
                 "targets": to_plain(self._last_targets), "ledger_count": self.ledger.rounds_recorded,
                 "ledger_head": self.ledger.head, "config_hash": genesis(to_toml(self.cfg))}
        atomic_torch_save(state, self.out / CHECKPOINT)

    def _load_checkpoint(self):
        from .results import from_plain
        ck = super()._load_checkpoint()
        if ck is not None:
            self._last_targets = from_plain(ck.get("targets"))
        return ck

    # -- one round -----------------------------------------------------------------------------------
    def _iteration(self, it: int, w, w_prev, tau, notes) -> dict:
        cfg, opts = self.cfg, self.algorithm.options
        row: dict = {"round": it, "client_round": it}
        if it == 1 and opts.warmup_epochs > 0:             # local cross-entropy only: nothing released
            w, _ = self.trainer.train_round(w, None, 0, epochs=opts.warmup_epochs)
        q = self.trainer.payload(w)                                              # (K, C, C)
        payload = q.reshape(self.K, self.payload_dim)
        h, h_cj = self._draw_channels(it)
        csi = None if self.csi is None else self.csi.estimates(it, h)
        plan = self.policy.plan(it, payload, h, h_cj, protective_rng(cfg, "policy", it), csi=csi)
        plan.extra.setdefault("csi", h if csi is None else csi)
        try:
            self.ledger.check(plan.mechanism)
        except BudgetExceeded as e:
            return {"_stop": True, "_stop_reason": str(e)}
        rec, attempts, eps = self._release_and_transmit(plan, it, notes)        # the release
        clean = plan.extra["clean_payload"].sum(axis=0)                      # noiseless aggregate
        nmse = target_nmse = None
        if rec.ok:
            targets = self.policy.targets(rec.aggregate, plan)
            exact = (self.policy.w[:, :, None] * q).sum(axis=0)                 # r^k without noise
            target_nmse = aggregate_nmse(targets, exact)
            nmse = aggregate_nmse(rec.aggregate, clean)
            if opts.targets == "simplex":
                from .learning.otafd import project_simplex
                targets = project_simplex(targets)
            self._last_targets = targets
        else:
            notes.append(f"round {it}: lost after {attempts} attempt(s): {rec.reason}")
        w_new, client_loss = self.trainer.train_round(w, self._last_targets, it)
        row.update(self._metrics(w_new, client_loss))
        theory = float(np.sum(plan.extra["aggregate_noise_var"]) / np.sum(clean ** 2))
        case = np.asarray(plan.extra["case"])
        row.update({
            "sensitivity": plan.mechanism.sensitivity, "sigma_eff": plan.mechanism.sigma_eff,
            "mu": plan.extra["mu"], "alpha_u": plan.alpha_u, "cj_active": False, "cj_power": 0.0,
            "case2_classes": int(np.sum(case == 2)), "case1_classes": int(np.sum(case == 1)),
            "artificial_noise": float(np.sum(plan.extra["rcv_noise"])),
            "lambda_min": float(np.min(plan.extra["lambda"][case > 0])) if np.any(case > 0) else None,
            "aggregate_nmse": nmse, "aggregate_nmse_theory": theory, "target_nmse": target_nmse,
            "uses_clients": True, "lost": not rec.ok, "lost_reason": rec.reason if not rec.ok else "",
            "attempts": attempts, "faults": rec.faults, "channel_uses": rec.channel_uses, "air_s": rec.wall_s,
            "payload_dim": self.payload_dim, "transmitting": self.K,
            "max_power_ratio": float(np.max(plan.transmit_energy() / plan.power_limit)),
        })
        row.update(self._eps_fields(eps))
        row["_w"] = w_new
        return row

    def _metrics(self, w, client_loss=None) -> dict:
        acc, loss = self.trainer.evaluate(w)
        out = {"test_accuracy": float(np.mean(acc)), "test_accuracy_min": float(np.min(acc)),
               "test_accuracy_max": float(np.max(acc)), "test_loss": float(np.mean(loss)),
               "test_accuracy_devices": [float(a) for a in acc]}
        if client_loss is not None and np.all(np.isfinite(client_loss)):
            out["train_loss"] = float(np.asarray(self.data.p) @ client_loss)
            out["local_train_loss"] = out["train_loss"]
        else:
            out["train_loss"] = out["local_train_loss"] = None
        return out

    def _summary(self, rows, prior_wall, t_start, stopped, notes) -> dict:
        s = super()._summary(rows, prior_wall, t_start, stopped, notes)
        last = rows[-1] if rows else {}
        uses = [r["channel_uses"] for r in rows if r.get("channel_uses")]
        s.update({
            "final_accuracy_min": last.get("test_accuracy_min"), "final_accuracy_max": last.get("test_accuracy_max"),
            "payload_dim": self.payload_dim, "channel_uses_per_round": float(np.mean(uses)) if uses else None,
            "channel_uses_total": int(np.sum(uses)) if uses else 0,
            "case2_rounds": sum(1 for r in rows if r.get("case2_classes")),
            "design_rounds": int(self.policy.T), "prop2_rounds": int(self.policy.suggested_rounds),
            "z_star": float(self.policy.z_star), "calibrate": self.policy.options.calibrate,
            "gamma": float(self.algorithm.options.gamma), "jammer_rounds": 0,
        })
        return s
