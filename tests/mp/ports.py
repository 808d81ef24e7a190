"""Ports for a swarm's first peer to listen on, in tests and benches.

A port the kernel hands out for bind(port 0) is in the ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range), and the kernel may hand it out
again, to another process's listener or outgoing connection, before the
job meant to listen on it starts: mpirun's own out-of-band listener took one
so in CI, and the swarm's first peer could not listen. A port below that
range is never handed out by the kernel; one is drawn at random there and
kept only if it binds now, so that tests run side by side by ctest -j rarely
draw the same one.
"""

import random
import socket

_LOWEST = 10000


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _binds(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    """A loopback TCP port that binds now and that the kernel does not hand
    out on its own."""
    high = _ephemeral_low()
    if high - _LOWEST >= 1000:
        rng = random.SystemRandom()
        for _ in range(200):
            port = rng.randrange(_LOWEST, high)
            if _binds(port):
                return port
    with socket.socket() as s:  # no room below the ephemeral range
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
