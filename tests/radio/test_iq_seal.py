"""A sealed sender (radio/iq_seal.py): its flowgraph writes into an unnamed socketpair, a relay of its process
sends whole complex64 samples on a socket secured before its bind. It carries a burst sample for sample to a
reader of its own process, binds nothing until it is used, and closes without hanging when its reader never
came (its writer blocked on a full socketpair, its relay on a PUSH socket with no peer)."""
import os
import shutil
import threading
import time

import numpy as np
import pytest

from otafl_sdr.radio.iq_seal import Sealed
from otafl_sdr.radio.zmq_channel import ZmqLayout, capture_one, ipc_endpoint, ipc_folder, push_client, release

pytestmark = [pytest.mark.gnuradio]


def _layout(n_dim: int):
    from otafl_sdr.config.schema import Config
    L = ZmqLayout(Config(), 2, n_dim)
    return L, L.client_symbols(1.0, np.random.default_rng(3).normal(size=n_dim), 1.0)


def test_a_sealed_burst_arrives_whole_and_binds_only_when_used():
    folder = ipc_folder("seal-")
    try:
        ep = Sealed.own_process(ipc_endpoint(folder))
        assert os.listdir(folder) == []                       # nothing bound before the stream starts
        L, sym = _layout(3000)                                # (n,) complex64, many socketpair reads
        pusher = push_client(L, 0, sym, 1.0, ep, tap=True)
        try:
            assert os.listdir(folder) == [os.path.basename(ep)]     # the relay's own-process socket only
            got = capture_one(pusher.reach, L.n_samples, time.time() + 30)
            assert pusher.wait_sent(time.time() + 10)
            sent = pusher.samples(time.time() + 10)
            assert got is not None and got.shape == (L.n_samples,) and np.array_equal(got, sent)
        finally:
            release(pusher)
        unused = Sealed.own_process(ipc_endpoint(folder))
        unused.relay.close()                                  # never used: nothing to close, nothing bound
        assert not unused.relay.thread and os.path.basename(unused) not in os.listdir(folder)
    finally:
        shutil.rmtree(folder)


def test_a_sealed_pusher_whose_reader_never_came_closes():
    """A burst far larger than the socketpair's buffer and the PUSH socket's queue of a peer that never came:
    release() still returns (the writer gets EPIPE, the relay's send ETERM)."""
    folder = ipc_folder("seal-")
    try:
        L, sym = _layout(400_000)
        pusher = push_client(L, 0, sym, 1.0, Sealed.own_process(ipc_endpoint(folder)))
        time.sleep(0.5)
        assert not pusher.sent()                              # it is stuck: nobody reads
        closer = threading.Thread(target=release, args=(pusher,), daemon=True)
        closer.start()
        closer.join(60)
        assert not closer.is_alive()
        assert not pusher.sealed and pusher.tb is None
    finally:
        shutil.rmtree(folder)
