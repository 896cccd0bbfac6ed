"""PrivacyLedger: budget refusal at the boundary, JSONL written before record returns, exact resume."""
import json
import math
import os

import numpy as np
import pytest

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.errors import BudgetExceeded, ConfigError, UserError
from otafl_sdr.privacy.base import Accountant
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.privacy.paper000 import paper_epsilon
from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism

DELTA = 1e-5


def cfg(**kw):
    base = dict(eps=2.0, delta=DELTA, accountant="rdp", report=["paper", "rdp", "pld"], enforce=True)
    base.update(kw)
    return PrivacyConfig(**base)


def rounds(n, start=1):
    """Heterogeneous rounds as the cj_adaptive policy makes them, with an Upcycled-FL free round every
    second iteration."""
    rng = np.random.default_rng(3)
    out = []
    for t in range(start, start + n):
        if t % 2 == 0:
            out.append(Mechanism(t, 0.0, 0.0, uses_data=False))
        else:
            out.append(Mechanism(t, float(rng.uniform(0.005, 0.01)), float(rng.uniform(0.1, 0.2)),
                                 extra={"s_min": np.float64(1.0), "s_max": float(rng.uniform(1, 3))}))
    return out


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.parametrize("acct", ["paper", "rdp", "pld"])
def test_check_refuses_exactly_above_the_budget(acct):
    first, nxt = Mechanism(1, 0.01, 0.05), Mechanism(2, 0.01, 0.04)
    probe = PrivacyLedger(cfg(accountant=acct, eps=100.0), None)
    probe.record(first)
    reach = probe.accountants[acct].peek(nxt)
    before = probe.epsilons()
    assert probe.epsilons() == before and probe.rounds_recorded == 1      # peek changed nothing

    at = PrivacyLedger(cfg(accountant=acct, eps=reach), None)              # reaching the budget: allowed
    at.record(first)
    assert not at.would_exceed(nxt)
    at.check(nxt)
    assert at.record(nxt)[acct] == reach and not at.exceeded

    below = PrivacyLedger(cfg(accountant=acct, eps=math.nextafter(reach, 0)), None)
    below.record(first)
    e_before = below.epsilons()
    assert below.would_exceed(nxt)
    with pytest.raises(BudgetExceeded) as err:
        below.check(nxt)
    msg = str(err.value)
    assert "round 2" in msg and f"'{acct}'" in msg and f"{reach:.6g}" in msg and "privacy.eps" in msg
    assert below.epsilons() == e_before and below.rounds_recorded == 1    # refusal spends nothing

    free = PrivacyLedger(cfg(accountant=acct, eps=math.nextafter(reach, 0), enforce=False), None)
    free.record(first)
    free.check(nxt)                                                        # enforce = false: no refusal
    assert free.would_exceed(nxt)
    free.record(nxt)
    assert free.exceeded


def test_paper_enforcing_refuses_what_it_cannot_account():
    led = PrivacyLedger(cfg(accountant="paper", eps=50.0), None)
    with pytest.raises(BudgetExceeded, match="cannot account"):
        led.check(Mechanism(1, 0.01, 0.1, sampling_prob=0.5))
    eps = led.record(Mechanism(1, 0.01, 0.1, sampling_prob=0.5))           # if sent anyway, it is recorded
    assert eps["paper"] is None and eps["rdp"] > 0 and eps["pld"] > 0


def test_record_writes_and_fsyncs_before_returning(tmp_path, monkeypatch):
    path = tmp_path / "privacy_ledger.jsonl"
    seen = []
    real_fsync = os.fsync

    def spy(fd):                                    # the real fsync, plus what the file holds at that moment
        real_fsync(fd)
        if path.exists():
            seen.append(len(path.read_text().splitlines()))

    monkeypatch.setattr(os, "fsync", spy)
    led = PrivacyLedger(cfg(), path)
    for i, m in enumerate(rounds(5)):
        eps = led.record(m)
        assert i + 1 in seen                        # the line was there when fsync ran, before return
        got = lines(path)
        assert len(got) == i + 1 == led.rounds_recorded
        last = got[-1]
        assert last["round"] == m.round and last["eps"] == eps and last["delta"] == DELTA
        assert last["sensitivity"] == m.sensitivity and last["sigma_eff"] == m.sigma_eff
        assert last["uses_data"] == m.uses_data and last["sampling_prob"] == m.sampling_prob
        assert last["accountant"] == "rdp" and last["eps_budget"] == 2.0 and last["time"] > 0
    assert lines(path)[0]["extra"] == {"s_min": 1.0, "s_max": lines(path)[0]["extra"]["s_max"]}


def test_resume_reproduces_epsilons_exactly(tmp_path):
    path = tmp_path / "l.jsonl"
    mechs = rounds(9) + [Mechanism(10, 0.008, 0.15, sampling_prob=0.6)]
    whole = PrivacyLedger(cfg(), None)
    for m in mechs:
        whole.record(m)
    first = PrivacyLedger(cfg(), path)
    for m in mechs[:6]:
        first.record(m)
    again = PrivacyLedger.resume(cfg(), path)
    assert again.epsilons() == first.epsilons() and again.rounds_recorded == 6
    assert again.result_fields() == first.result_fields()
    for m in mechs[6:]:
        again.record(m)
    assert again.epsilons() == whole.epsilons()
    assert len(lines(path)) == len(mechs)
    third = PrivacyLedger.resume(cfg(), path)
    assert third.epsilons() == whole.epsilons() and third.epsilons()["paper"] is None
    # state_dict round trip too
    fresh = PrivacyLedger(cfg(), None)
    fresh.load_state_dict(json.loads(json.dumps(third.state_dict())))
    assert fresh.epsilons() == whole.epsilons() and fresh.rounds_recorded == len(mechs)


def test_resume_of_missing_file_is_empty(tmp_path):
    led = PrivacyLedger.resume(cfg(), tmp_path / "none.jsonl")
    assert led.rounds_recorded == 0 and led.epsilons() == {"rdp": 0.0, "paper": 0.0, "pld": 0.0}


def test_duplicate_round_refused_unless_identical(tmp_path):
    path = tmp_path / "l.jsonl"
    led = PrivacyLedger(cfg(), path)
    m = Mechanism(1, 0.01, 0.1, extra={"s_min": np.float64(1.5)})
    eps = led.record(m)
    before = led.epsilons()
    with pytest.raises(ValueError, match="round 1"):
        led.record(Mechanism(1, 0.01, 0.11, extra={"s_min": 1.5}))
    with pytest.raises(ValueError):
        led.record(Mechanism(1, 0.01, 0.1, extra={"s_min": 2.0}))
    assert led.record(Mechanism(1, 0.01, 0.1, extra={"s_min": 1.5})) == eps   # identical: no-op
    assert led.epsilons() == before and len(lines(path)) == 1 and led.rounds_recorded == 1
    assert not led.would_exceed(m)                                            # already paid for
    # a retransmission of round 1 with fresh noise is another release: counted under its own attempt
    led.record(Mechanism(1, 0.01, 0.1, extra={"s_min": 1.5, "attempt": 1}))
    assert led.epsilons()["rdp"] > before["rdp"] and len(lines(path)) == 2
    # after a restart the same holds
    again = PrivacyLedger.resume(cfg(), path)
    assert again.record(Mechanism(1, 0.01, 0.1, extra={"s_min": 1.5})) == eps
    with pytest.raises(ValueError):
        again.record(Mechanism(1, 0.02, 0.1, extra={"s_min": 1.5}))
    assert again.epsilons() == led.epsilons() and len(lines(path)) == 2


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    path = tmp_path / "l.jsonl"
    led = PrivacyLedger(cfg(), path)
    mechs = rounds(5)
    for m in mechs[:4]:
        led.record(m)
    eps4 = led.epsilons()
    led.record(mechs[4])
    raw = path.read_bytes()
    cut = raw.rstrip(b"\n").rfind(b"\n") + 1 + 30          # 30 bytes into the last line
    path.write_bytes(raw[:cut])
    with pytest.warns(UserWarning, match="truncated last line"):
        again = PrivacyLedger.resume(cfg(), path)
    assert again.rounds_recorded == 4 and again.epsilons() == eps4
    assert path.read_bytes() == raw[:raw.rstrip(b"\n").rfind(b"\n") + 1]    # the torn tail is cut
    again.record(mechs[4])                                  # and the next line starts clean
    assert [r["round"] for r in lines(path)] == [1, 2, 3, 4, 5]
    assert PrivacyLedger.resume(cfg(), path).epsilons() == again.epsilons()


def test_complete_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "l.jsonl"
    led = PrivacyLedger(cfg(), path)
    for m in rounds(3):
        led.record(m)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    with pytest.warns(UserWarning, match="no newline"):
        again = PrivacyLedger.resume(cfg(), path)
    assert again.epsilons() == led.epsilons() and again.rounds_recorded == 3
    again.record(Mechanism(4, 0.01, 0.1))
    assert len(lines(path)) == 4


def test_corrupt_middle_line_is_an_error(tmp_path):
    path = tmp_path / "l.jsonl"
    led = PrivacyLedger(cfg(), path)
    for m in rounds(3):
        led.record(m)
    ls = path.read_text().splitlines()
    ls[1] = ls[1][:20]
    path.write_text("\n".join(ls) + "\n")
    with pytest.raises(UserError, match="line 2 is corrupt"):
        PrivacyLedger.resume(cfg(), path)


def test_result_fields_and_report_choice():
    led = PrivacyLedger(cfg(report=["rdp"]), None)
    led.record(Mechanism(1, 0.01, 0.1))
    f = led.result_fields()
    assert list(f) == ["eps_paper", "eps_rdp", "eps_pld"]
    # the tight PLD epsilon is reported even when the report list leaves it out (issue 14)
    assert f["eps_paper"] is None and f["eps_pld"] > 0 and f["eps_rdp"] > 0
    assert list(led.accountants) == ["rdp", "pld"]
    full = PrivacyLedger(cfg(accountant="pld"), None)
    full.record(Mechanism(1, 0.01, 0.1))
    f = full.result_fields()
    assert f["eps_paper"] == pytest.approx(paper_epsilon(0.01 ** 2 / (2 * 0.1 ** 2), DELTA), rel=1e-12)
    assert f["eps_pld"] <= f["eps_rdp"] <= f["eps_paper"]
    assert list(full.accountants) == ["pld", "paper", "rdp"] and full.epsilon == f["eps_pld"]


def test_unknown_accountant_names_the_key():
    with pytest.raises(ConfigError, match="privacy.report"):
        PrivacyLedger(cfg(report=["paper", "nope"]), None)
    with pytest.raises(ConfigError, match="privacy.accountant"):
        PrivacyLedger(cfg(accountant="nope"), None)


class _CountingAccountant(Accountant):
    """A stand-in for accountants added later (e.g. ``fdp``): epsilon = number of rounds with data."""

    name = "count_test"

    def _reset(self):
        self.n = 0

    def step(self, mech):
        super().step(mech)
        self.n += int(mech.uses_data and mech.sensitivity > 0)

    def epsilon(self, delta=None):
        return float(self.n) * self.context.get("unit_cost", 1.0)


@pytest.fixture
def extra_accountant():
    ACCOUNTANTS.register("count_test", "test only")(_CountingAccountant)
    yield
    ACCOUNTANTS.unregister("count_test")


def test_any_registered_accountant_can_report(tmp_path, extra_accountant):
    pc = cfg(report=["paper", "count_test"])
    path = tmp_path / "l.jsonl"
    led = PrivacyLedger(pc, path, context={"unit_cost": 0.5})
    for m in rounds(5):
        led.record(m)
    assert led.result_fields()["eps_count_test"] == 1.5 and led.result_fields()["eps_pld"] > 0   # PLD always
    assert lines(path)[-1]["eps"]["count_test"] == 1.5
    again = PrivacyLedger.resume(pc, path, context={"unit_cost": 0.5})
    assert again.epsilons() == led.epsilons()
    # its would_exceed comes from the base class (deep copy + step) when it enforces
    enf = PrivacyLedger(cfg(accountant="count_test", eps=1.0, report=[]), None)
    enf.record(Mechanism(1, 0.01, 0.1))
    assert not enf.would_exceed(Mechanism(2, 0.0, 0.0, uses_data=False))
    assert enf.would_exceed(Mechanism(3, 0.01, 0.1)) and enf.epsilon == 1.0


def test_bad_mechanism_is_rejected():
    led = PrivacyLedger(cfg(), None)
    for bad in (Mechanism(1, -0.1, 1.0), Mechanism(1, 0.1, float("nan")), Mechanism(1, 0.1, 1.0, sampling_prob=1.5),
                Mechanism(1.5, 0.1, 1.0)):
        with pytest.raises(ValueError):
            led.record(bad)
    assert led.rounds_recorded == 0
