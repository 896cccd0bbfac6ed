"""What the simulator fixtures read "gone" and "free" from (radio/uhd_sim_device.py): a bind probe of the
simulator's ports, sound only because a stopped simulator's whole process group has exited first
(``group_running``). In the simulator group (the file's name): the default simulator binds 0.0.0.0."""
import os
import signal
import socket
import subprocess
import sys
import time

from otafl_sdr.radio.uhd_sim_device import SIM_PORTS, group_running, ports_free

HOST = "127.0.0.99"          # no lab uses it (labs: 127.0.0.1 .. 127.0.0.N)


def test_a_port_held_on_the_address_is_seen_at_once_and_its_release_too():
    assert ports_free(HOST)
    for kind, port in SIM_PORTS:
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind((HOST, port))
            if kind == socket.SOCK_STREAM:
                s.listen()
            t0 = time.monotonic()
            assert not ports_free(HOST)
            assert time.monotonic() - t0 < 0.1            # UHD discovery waits ~0.5 s for a free address
        assert ports_free(HOST)


def test_a_group_runs_while_any_member_runs_and_a_zombie_does_not_count():
    # a leader whose child outlives it, in a group of its own (as a simulator and its discovery process)
    leader = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                               "print('up', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert leader.stdout.readline().strip() == "up"
        assert group_running(leader.pid)
        leader.kill()                                     # the leader alone: its child still runs
        leader.wait()
        assert group_running(leader.pid)
    finally:
        try:
            os.killpg(leader.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        leader.wait()
        leader.stdout.close()
    deadline = time.monotonic() + 5
    while group_running(leader.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not group_running(leader.pid)                  # (the orphan may linger as a zombie: not counted)
