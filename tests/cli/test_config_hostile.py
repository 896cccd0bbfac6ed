"""Every config key refuses nonsense with one line naming the key (ConfigError, exit 2) and never a
traceback or a hang: generated hostile values for every key of every section."""
import dataclasses
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otafl_sdr.config.schema import Config
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import UserError

from typing import get_type_hints

pytestmark = [pytest.mark.net, pytest.mark.slow]

KEYS, TYPES = [], {}
for _s in dataclasses.fields(Config):
    _obj = _s.default_factory()
    for _f in dataclasses.fields(_obj):
        KEYS.append(f"{_s.name}.{_f.name}")
        TYPES[KEYS[-1]] = get_type_hints(type(_obj))[_f.name]
HOSTILE = ["-1", "0", "1e30", "-1e30", "inf", "-inf", "nan", "1e-320", "2147483648", "9223372036854775808",
           "'x'", "[]", "[[1, 2]]", "[[-5, 0.1]]", "{}", "{a = 1}", "true", "''", "[[[[[[[[[[1]]]]]]]]]]", "0.5",
           "-0.0", "1e308", "[1e400]", "'../../etc'"]


def _one(key, raw):
    try:
        load_config(None, [f"{key}={raw}"])
        return "accepted"
    except UserError as e:
        msg = str(e)
        assert "\n" not in msg and msg, (key, raw, msg)
        return "refused"


@pytest.mark.parametrize("key", KEYS)
def test_every_key_refuses_or_accepts_hostile_values_without_a_traceback(key):
    outcomes = {raw: _one(key, raw) for raw in HOSTILE}
    must = ["inf", "-inf", "nan", "[[[[[[[[[[1]]]]]]]]]]"] + (["9223372036854775808", "1e30"] if TYPES[key] is int else [])
    for raw in must:
        assert outcomes[raw] == "refused", (key, raw)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(KEYS),
       value=st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                       st.booleans(), st.lists(st.integers(), max_size=4),
                       st.lists(st.lists(st.floats(allow_nan=False), max_size=3), max_size=3)))
def test_generated_values_never_raise_anything_but_a_config_error(key, value):
    raw = repr(value).replace("True", "true").replace("False", "false") if not isinstance(value, str) else value
    _one(key, raw)


def test_hostile_value_on_the_command_line_is_one_line_exit_2(tmp_path, capsys):
    """`otafl-sdr run --set KEY=VALUE` with a hostile value: exit 2, one line, no folder. The first as a process
    (the status a shell sees, nothing else printed by the interpreter), the others through the CLI's main in
    this process (the same parser, validation and exit status, without an interpreter start each)."""
    from otafl_sdr.cli.main import main
    for i, sets in enumerate((["privacy.report=[[1,2]]"], ["run.seed=-1"], ["privacy.delta=1e-320"],
                              ["power.alpha_u=1e-300"], ["data.dirichlet_alpha=1e-320"], ["net.timeout_s=inf"],
                              ["train.lr=inf"], ["algorithm.lambda_schedule=[[-5, 0.1]]"], ["power.max_snr_db=-400"],
                              ["run.rounds=1e30"])):
        argv = ["run", "--out", str(tmp_path / "x"), "--quiet"] + [a for s in sets for a in ("--set", s)]
        if i == 0:
            r = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", *argv], capture_output=True, text=True,
                               timeout=60)
            status, err = r.returncode, r.stderr
        else:
            capsys.readouterr()
            status = main(argv)
            err = capsys.readouterr().err
        assert status == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (sets, err)
        assert not (tmp_path / "x").exists()


def test_run_name_cannot_leave_the_results_folder():
    for bad in ("'../../etc'", "'a/b'", "''", "'.hidden'"):
        with pytest.raises(UserError, match="run.name"):
            load_config(None, [f"run.name={bad}"])
    assert load_config(None, ["run.name=t6-m5-K10-s0.5-seed1"]).run.name == "t6-m5-K10-s0.5-seed1"
