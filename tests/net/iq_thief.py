"""What a same-uid thief runs to find the IQ plane's sockets (tests/net/test_iq_same_uid.py and
test_iq_socket_birth.py put it into their thief scripts): every file under the run's IQ folders and every
bound path there that /proc/net/unix names."""

FIND_SOCKETS = r"""
def sockets():          # every file under the run's IQ folders, and every bound path there /proc/net/unix names
    found = set()
    for root in roots:
        for d, _, files in os.walk(root):
            found.update(os.path.join(d, f) for f in files)
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        f = line.split()
        if len(f) >= 8 and any(f[7].startswith(r.rstrip("/") + "/") for r in roots):
            found.add(f[7])
    return found
"""
