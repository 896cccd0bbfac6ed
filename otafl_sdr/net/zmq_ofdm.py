"""OFDM on the zmq testbed (``phy.waveform = "ofdm"``, air zmq; issue 26 item 2): what the server adds to
an attempt's messages and what each node does with it. The IQ plane is radio/zmq_ofdm.py's, the same
pieces the in-process zmq_inproc air runs.

Server (``attempt_design``): the round's data carriers (plan.extra["ofdm"], power/ofdm_plan.py) and the
shared pre-equalised reference for the attempt's senders (power/ofdm_plan.ofdm_reference on the planned
CSI: a client that died before the attempt neither sends nor is expected on the reference). Both are
planned quantities (seeded channels, the policy's factors), never data. They travel as arrays
(net/messages.py): ``ofdm_carriers`` to every node of the attempt, ``ofdm_ref`` (K, U) to the clients,
``ofdm_ref_amp`` (U,) to the receiver.

Client i (``client_burst``): its per-subcarrier factors alpha_ik from its OWN decision alpha_i, the seeded
multipath shape of its link and its own power limit (``own_subcarrier_alpha``, at ``round_start``: the
power bound s_ik of power/ofdm_plan.py is enforced at the client, whatever the server sends), its
payload (never silenced by its data: NaN / inf sent as zeros) and the server's reference row. Jammer:
alpha_cj CN(0, 2) on the payload slots, drawn from this host's OS entropy. Channel emulator: the loopback
channel block with the round's seeded multipath and thermal / phase noise seeded from its OS entropy.
Receiver: phy/ofdm.demodulate. Every node checks the carriers (phy/ofdm_burst.check_carriers) and the
arrays' shapes and refuses the attempt in one line otherwise."""
from __future__ import annotations

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.phy.ofdm import OfdmLayout
from otafl_sdr.phy.ofdm_burst import check_carriers


def attempt_design(cfg, plan, senders: list[int]) -> dict:
    """{"carriers" (n_d,) int64, "ref" (K, U), "ref_amp" (U,)}: the attempt's OFDM design (module doc)."""
    from otafl_sdr.channel.ofdm_sim import subcarrier_shapes
    from otafl_sdr.phy.packing import symbols_for
    from otafl_sdr.phy.reference_design import allowance
    from otafl_sdr.power.ofdm_plan import ofdm_reference
    od = plan.extra["ofdm"]
    lay = OfdmLayout.from_phy(cfg.phy)
    K = plan.clients
    active = np.zeros(K, dtype=bool)
    active[list(senders)] = True
    h_known = np.asarray(plan.extra.get("csi", plan.h), np.complex128)
    H = h_known[:, None] * subcarrier_shapes(cfg, plan.round, K)
    trunc = np.asarray(od["truncated"], bool) | ~active[:, None]
    ref, ref_amp = ofdm_reference(lay, H, trunc, allowance(plan, active), symbols_for(plan.dim), int(od["n_ofdm"]))
    return {"carriers": np.asarray(od["carriers"], np.int64), "ref": ref, "ref_amp": ref_amp}


def own_subcarrier_alpha(cfg, plan, i: int) -> np.ndarray:
    """(U,) client i's alpha_ik on its own plan (power/ofdm_plan.plan_subcarriers: its flat alpha_i, the
    round's seeded shape G_ik, its power limit P_i, the truncation threshold)."""
    from otafl_sdr.channel.ofdm_sim import subcarrier_shapes
    from otafl_sdr.phy.reference_design import sending
    from otafl_sdr.power.ofdm_plan import plan_subcarriers
    G = subcarrier_shapes(cfg, plan.round, plan.clients)
    alpha_sc, _, _ = plan_subcarriers(plan.alpha, G, plan.power_limit, sending(plan), cfg.phy.ofdm_truncation)
    return np.asarray(alpha_sc[int(i)], np.complex128)


def plane_of(cfg, msg, dim: int):
    """The attempt's radio/zmq_ofdm.OfdmPlane from a message's ``ofdm_carriers`` (None when the run is
    single carrier); UserError naming what is wrong otherwise."""
    if getattr(cfg.phy, "waveform", "single_carrier") != "ofdm":
        return None
    from otafl_sdr.radio.zmq_ofdm import OfdmPlane
    lay = OfdmLayout.from_phy(cfg.phy)
    raw = msg.arrays.get("ofdm_carriers")
    if raw is None:
        raise UserError(f"'{msg.type}' of an OFDM run carries no ofdm_carriers")
    try:
        carriers = check_carriers(lay, raw)
    except ValueError as e:
        raise UserError(str(e)) from None
    return OfdmPlane(cfg, int(cfg.data.clients), int(dim), carriers)


def row_of(msg, name: str, shape: tuple) -> np.ndarray:
    """A complex array of the message with the expected shape, or UserError."""
    a = msg.arrays.get(name)
    if a is None or tuple(a.shape) != tuple(shape) or a.dtype.kind != "c":
        raise UserError(f"'{msg.type}' needs a complex {name} of shape {shape}")
    return np.asarray(a, np.complex128)


def client_burst(node, msg, dec: dict):
    """``start(endpoint, tap)`` pushing client ``node.i``'s OFDM burst for ``transmit`` (module doc), and
    its length in samples."""
    from otafl_sdr.phy.ofdm_burst import client_stream
    plane = plane_of(node.cfg, msg, len(dec["payload"]))
    ref = row_of(msg, "ofdm_ref", (plane.K, plane.lay.used))[node.i]
    alpha = dec["alpha_sc"]
    stream = client_stream(plane.frame, dec["payload"], alpha, ref)
    return (lambda ep, tap: plane.push_client(node.i, stream, alpha, ep, tap=tap)), plane.n_samples


def jammer_burst(node, msg):
    """``start(endpoint, tap)`` pushing the jammer's OFDM burst for ``jam`` (OS entropy), and its length."""
    from otafl_sdr.noise_source import entropy_rng
    from otafl_sdr.phy.ofdm_burst import jammer_draws, jammer_stream
    plane = plane_of(node.cfg, msg, int(msg["dim"]))
    stream = jammer_stream(plane.frame, float(msg["alpha_cj"]), jammer_draws(plane.frame, entropy_rng()))
    return (lambda ep, tap: plane.push_jammer(stream, ep, tap=tap)), plane.n_samples


def ofdm_arrays(design: dict | None) -> dict:
    """The attempt's message arrays by recipient ("clients", "channel" (also the jammer), "receiver");
    {} on a single carrier."""
    if design is None:
        return {}
    c = design["carriers"]
    return {"clients": {"ofdm_carriers": c, "ofdm_ref": np.asarray(design["ref"], np.complex128)},
            "channel": {"ofdm_carriers": c},
            "receiver": {"ofdm_carriers": c, "ofdm_ref_amp": np.asarray(design["ref_amp"], np.complex128)}}


def ofdm_recording(cfg, plan, design: dict, iq: np.ndarray) -> dict:
    """The server's SigMF record of a testbed OFDM attempt from the receiver's samples (the window its
    timing search and FFTs read, radio/zmq_ofdm.ofdm_recording); annotations at the nominal training."""
    from otafl_sdr.radio.zmq_ofdm import OfdmPlane, ofdm_recording as record
    plane = OfdmPlane(cfg, plan.clients, plan.dim, design["carriers"])
    fr = plane.frame
    out = record(cfg, plan, plane, iq, design["ref_amp"], fr.lead * plane.lay.symbol_len + fr.rx_delay, cfg.air.name,
                 f"otafl-sdr testbed, {cfg.air.name} air (receiver node, OFDM)")
    return out
