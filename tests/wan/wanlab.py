#!/usr/bin/python3
"""WAN emulation lab: N hosts as network namespaces on this machine.

Each host i (1-based) is a namespace <prefix>-h<i> with address 10.91.0.<i>/24
on its interface wan0, joined by a veth to its router namespace <prefix>-r<i>.
Upload is a tc tbf on wan0 (host side), download a tbf on the router's port
towards the host. Every router forwards 10.91.0.0/24 into a TUN device held
by one relay process (wanrelay, built from wanrelay.c), which delays each
packet by d_i/2 + d_j/2 on its way from host i to host j; loss is an
nftables numgen rule in each router's forward chain (half of the host's
loss_pct on the way out, half on the way in). See README.md next to this file.

    wanlab.py up <topology> [--scale F]   build a lab and leave it up
    wanlab.py exec <prefix> <i> -- CMD...  run CMD in host i
    wanlab.py down <prefix> | --stale | --all
    wanlab.py list
    wanlab.py check <topology> [--scale F] [--seconds S] [--strict] [--tries K]

Python API (bench/wan.py, tests):

    with Lab("homogeneous", scale=1.0) as lab:
        p = lab.popen(1, ["iperf3", "-s"])      # runs in host 1's namespace
        lab.ip(2)                               # "10.91.0.2"

Only Python's standard library; run it as root with /usr/bin/python3.
"""
import argparse
import atexit
import dataclasses
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOPOLOGY_DIR = os.path.join(HERE, "topologies")
STATE_DIR = "/run/dedmpi-wanlab"  # one folder per lab this tool built, nothing else
SUBNET = "10.91.0"
PREFIX_RE = re.compile(r"^dw[0-9]+(n[0-9]+)?$")
# TCP payload per Ethernet frame (MSS 1448 with timestamps, 1514 B on the
# wire as tbf counts it): the most goodput a shaped link can carry.
GOODPUT = 1448 / 1514
TBF_LATENCY_MS = 100  # queue: 100 ms at the link's rate
PING_RE = re.compile(r"(\d+) packets transmitted, (\d+) received")
RTT_RE = re.compile(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
TIME_RE = re.compile(r"time=([\d.]+) ms")


class LabError(Exception):
    pass


# ---------------------------------------------------------------- topology


@dataclasses.dataclass
class HostSpec:
    name: str
    up_mbit: float
    down_mbit: float
    delay_ms: float  # one way; path i->j is delay_i/2 + delay_j/2
    loss_pct: float  # path i->j loses about loss_i/2 + loss_j/2 percent

    @property
    def up_Bps(self):
        return self.up_mbit * 1e6 / 8

    @property
    def down_Bps(self):
        return self.down_mbit * 1e6 / 8


@dataclasses.dataclass
class Topology:
    name: str
    hosts: list
    description: str = ""

    def scaled(self, scale):
        hosts = [dataclasses.replace(h, up_mbit=h.up_mbit * scale, down_mbit=h.down_mbit * scale)
                 for h in self.hosts]
        return Topology(self.name, hosts, self.description)

    def path_delay_ms(self, i, j):
        return self.hosts[i - 1].delay_ms / 2 + self.hosts[j - 1].delay_ms / 2

    def path_loss(self, i, j):
        a, b = self.hosts[i - 1].loss_pct / 200, self.hosts[j - 1].loss_pct / 200
        return 1 - (1 - a) * (1 - b)

    def bound_s(self, nbytes):
        """Lower bound on an all-reduce of nbytes among all hosts: every host
        sends and receives at least the whole vector once (1/min rate), and
        together they move 2(n-1)·N bytes each way (2(n-1)/Σ rates)."""
        n = len(self.hosts)
        ups = [h.up_Bps for h in self.hosts]
        downs = [h.down_Bps for h in self.hosts]
        return nbytes * max(1 / min(ups), 2 * (n - 1) / sum(ups), 1 / min(downs),
                            2 * (n - 1) / sum(downs))


def topology_path(name):
    if os.path.sep in name or name.endswith(".toml"):
        return name
    return os.path.join(TOPOLOGY_DIR, name + ".toml")


def load_topology(name):
    """A topology by name (tests/wan/topologies/<name>.toml) or by path."""
    if isinstance(name, Topology):
        return name
    path = topology_path(name)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        have = sorted(f[:-5] for f in os.listdir(TOPOLOGY_DIR) if f.endswith(".toml"))
        raise LabError("no topology %r (have: %s)" % (name, ", ".join(have)))
    defaults = doc.get("defaults", {})
    hosts = []
    for k, h in enumerate(doc.get("host", []), 1):
        v = dict(defaults)
        v.update(h)
        try:
            spec = HostSpec(name=str(v.get("name", "h%d" % k)), up_mbit=float(v["up_mbit"]),
                            down_mbit=float(v["down_mbit"]), delay_ms=float(v.get("delay_ms", 0)),
                            loss_pct=float(v.get("loss_pct", 0)))
        except KeyError as e:
            raise LabError("%s: host %d lacks %s" % (path, k, e))
        if spec.up_mbit <= 0 or spec.down_mbit <= 0 or spec.delay_ms < 0 or \
                not 0 <= spec.loss_pct < 100:
            raise LabError("%s: host %d has an invalid value: %s" % (path, k, spec))
        hosts.append(spec)
    if not 2 <= len(hosts) <= 64:  # wanrelay's MAX_HOSTS
        raise LabError("%s: want 2 to 64 [[host]] entries, got %d" % (path, len(hosts)))
    return Topology(str(doc.get("name", os.path.basename(path)[:-5])), hosts,
                    str(doc.get("description", "")))


# ---------------------------------------------------------------- helpers


def sh(argv, check=True, input=None, capture=True, timeout=60):
    r = subprocess.run(argv, input=input, capture_output=capture, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise LabError("command failed (rc %d): %s\n%s" % (r.returncode, shlex.join(argv),
                                                           (r.stderr or "").strip()))
    return r


def proc_start_time(pid):
    """The start time of a process (clock ticks since boot), to tell it from a
    later process that reuses its pid; None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def proc_cpu_s(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def alive(pid, start):
    return start is not None and proc_start_time(pid) == start


def kill_wait(pids, grace=2.0):
    """SIGTERM, then SIGKILL after grace seconds, to the given pids."""
    pids = [p for p in pids if p > 1 and p != os.getpid()]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + grace
    while pids and time.time() < deadline:
        pids = [p for p in pids if os.path.exists("/proc/%d" % p) and not _zombie(p)]
        time.sleep(0.05)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def find_relay(explicit=None):
    """The wanrelay binary: --relay, $WANRELAY, $BUILD_DIR/tests/wan/wanrelay,
    ./build/tests/wan/wanrelay, or compiled from wanrelay.c into a cache."""
    cands = [explicit, os.environ.get("WANRELAY")]
    build = os.environ.get("BUILD_DIR")
    if build:
        cands.append(os.path.join(build, "tests", "wan", "wanrelay"))
    cands.append(os.path.join(ROOT, "build", "tests", "wan", "wanrelay"))
    src = os.path.join(HERE, "wanrelay.c")
    for c in cands:
        if c and os.access(c, os.X_OK):
            if os.path.exists(src) and os.path.getmtime(c) < os.path.getmtime(src) and c != explicit:
                continue  # older than its source: rebuild below rather than run stale code
            return os.path.abspath(c)
    cache = os.path.join("/tmp", "dedmpi-wanrelay")
    out = os.path.join(cache, "wanrelay")
    if os.access(out, os.X_OK) and os.path.getmtime(out) >= os.path.getmtime(src):
        return out
    os.makedirs(cache, exist_ok=True)
    tmp = out + ".%d" % os.getpid()
    cc = os.environ.get("CC", "cc")
    sh([cc, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", tmp, src], timeout=120)
    os.replace(tmp, out)
    return out


# ---------------------------------------------------------------- the lab


class Lab:
    """A lab up for the life of a `with` block (or between up() and down()).

    Hosts are numbered from 1. Everything the lab creates is named after its
    prefix (dw<pid>, dw<pid>n<k> for a process's later labs), and teardown
    removes exactly that: the processes inside its namespaces, its relay,
    its namespaces (with them their veths, qdiscs, nft tables and TUNs) and
    its state folder. It runs on exceptions, SIGINT, SIGTERM and SIGHUP (in
    the main thread) and at interpreter exit; a lab whose owner was killed
    with SIGKILL is removed by `wanlab.py down --stale` (the relay itself
    dies with its owner)."""

    def __init__(self, topology, scale=1.0, relay=None, rt_prio=50, detach=False, offload=True,
                 rps=None, tcp_cc=None):
        self.base = load_topology(topology)
        if scale <= 0:
            raise LabError("scale must be > 0")
        self.scale = float(scale)
        self.topology = self.base.scaled(self.scale)
        self.relay_bin = relay
        # The hosts' TCP congestion control: None keeps what a new namespace
        # gets (the machine's default, net.ipv4.tcp_congestion_control).
        self.tcp_cc = tcp_cc
        self._allowed_cc_before = None  # the machine's list, while the lab widened it
        self.rt_prio = rt_prio
        self.detach = detach
        self.offload = offload
        self.rps = rps if rps is not None else os.environ.get("WANLAB_RPS", "1") != "0"
        # Loss is drawn per packet at the routers: a GSO packet would lose
        # its frames together, so a lossy lab sends frame by frame.
        self.gso = not any(h.loss_pct > 0 for h in self.topology.hosts)
        self.prefix = None
        self.dir = None
        self.namespaces = []
        self.relay = None  # Popen (attached) or None
        self.relay_pid = None
        self.relay_start = None
        self._procs = []
        self._old_handlers = {}
        self._is_up = False

    # ------------------------------------------------------------ naming

    @property
    def hosts(self):
        """HostSpec per host (index 0 = host 1), rates after the scale factor."""
        return self.topology.hosts

    @property
    def n(self):
        return len(self.topology.hosts)

    def host_ids(self):
        return range(1, self.n + 1)

    def ip(self, i):
        self._check_host(i)
        return "%s.%d" % (SUBNET, i)

    def ns(self, i):
        self._check_host(i)
        return "%s-h%d" % (self.prefix, i)

    def router_ns(self, i):
        self._check_host(i)
        return "%s-r%d" % (self.prefix, i)

    def _check_host(self, i):
        if not 1 <= i <= self.n:
            raise LabError("no host %r (hosts are 1..%d)" % (i, self.n))

    # ------------------------------------------------------------ running things

    def exec_argv(self, i, argv, hostname=True):
        """argv that runs `argv` inside host i's namespace. With hostname, in
        its own UTS namespace named h<i>: Open MPI daemons that share a
        hostname race on one session folder (reference/wanlab.md)."""
        cmd = ["ip", "netns", "exec", self.ns(i)]
        if hostname:
            cmd += ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', "h%d" % i]
        return cmd + list(argv)

    def popen(self, i, argv, env=None, hostname=True, **kw):
        """Popen of argv in host i (own session, killed at teardown). env is
        added to this process's environment."""
        penv = dict(os.environ)
        penv.update({k: str(v) for k, v in (env or {}).items()})
        kw.setdefault("start_new_session", True)
        p = subprocess.Popen(self.exec_argv(i, argv, hostname), env=penv, **kw)
        self._procs.append(p)
        return p

    def run(self, i, argv, env=None, timeout=None, hostname=False, **kw):
        """subprocess.run of argv in host i; output captured as text."""
        p = self.popen(i, argv, env=env, hostname=hostname, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, **kw)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(p)
            out, err = p.communicate()
            raise LabError("timed out in host %d: %s\n%s" % (i, shlex.join(argv), err))
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    @property
    def fakessh(self):
        """An ssh stand-in for mpirun's --mca plm_rsh_agent: `fakessh HOST CMD`
        runs CMD in that host's namespace (HOST = 10.91.0.<i> or h<i>)."""
        return os.path.join(self.dir, "fakessh")

    def hostfile(self, hosts=None, slots=1):
        hosts = list(hosts or self.host_ids())
        path = os.path.join(self.dir, "hostfile-%s" % "-".join(map(str, hosts)))
        with open(path, "w") as f:
            for i in hosts:
                f.write("%s slots=%d\n" % (self.ip(i), slots))
        return path

    def mpirun_args(self):
        """mpirun options for one rank per host over the lab's links."""
        return ["--mca", "plm_rsh_agent", self.fakessh, "--mca", "pml", "ob1", "--mca", "btl",
                "tcp,self", "--mca", "btl_tcp_if_include", SUBNET + ".0/24", "--mca",
                "oob_tcp_if_include", SUBNET + ".0/24"]

    # ------------------------------------------------------------ counters

    def tc_stats(self, i):
        """Bytes, packets and drops of host i's upload and download tbf."""
        res = {}
        for key, ns, dev in (("up", self.ns(i), "wan0"), ("down", self.router_ns(i), "toh")):
            out = sh(["tc", "-n", ns, "-s", "qdisc", "show", "dev", dev]).stdout
            m = re.search(r"qdisc tbf.*?Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)",
                          out, re.S)
            if m:
                res[key + "_bytes"], res[key + "_pkts"], res[key + "_drops"] = \
                    int(m.group(1)), int(m.group(2)), int(m.group(3))
        return res

    def nft_drops(self, i):
        """Packets the loss rules of host i's router dropped so far."""
        if self.hosts[i - 1].loss_pct <= 0:
            return 0
        out = sh(["ip", "netns", "exec", self.router_ns(i), "nft", "list", "table", "ip",
                  "wanlab"]).stdout
        return sum(int(x) for x in re.findall(r"counter packets (\d+)", out))

    def relay_stats(self):
        """The relay's counters (it prints them on SIGUSR1) as a dict."""
        log = os.path.join(self.dir, "relay.log")
        size = os.path.getsize(log) if os.path.exists(log) else 0
        if self.relay_pid and alive(self.relay_pid, self.relay_start):
            os.kill(self.relay_pid, signal.SIGUSR1)
            deadline = time.time() + 2
            while time.time() < deadline:
                with open(log) as f:
                    f.seek(size)
                    if "wanrelay: total" in f.read():
                        break
                time.sleep(0.02)
        return parse_relay_stats(open(log).read() if os.path.exists(log) else "")

    def relay_cpu_s(self):
        return proc_cpu_s(self.relay_pid) if self.relay_pid else None

    def bound_s(self, nbytes):
        return self.topology.bound_s(nbytes)

    # ------------------------------------------------------------ up

    def __enter__(self):
        self.up()
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def _alloc_prefix(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        existing = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
        k = 0
        while True:
            p = "dw%d" % os.getpid() + ("n%d" % k if k else "")
            taken = any(e.startswith(p + "-") for e in existing)
            try:
                os.mkdir(os.path.join(STATE_DIR, p))
                if not taken:
                    return p
                os.rmdir(os.path.join(STATE_DIR, p))
            except FileExistsError:
                pass
            k += 1

    def _save_state(self):
        st = {"prefix": self.prefix, "topology": self.base.name, "scale": self.scale,
              "namespaces": self.namespaces, "relay_pid": self.relay_pid,
              "relay_start": self.relay_start,
              "owner_pid": self.relay_pid if self.detach else os.getpid(),
              "owner_start": self.relay_start if self.detach else proc_start_time(os.getpid()),
              "hosts": [dataclasses.asdict(h) for h in self.hosts]}
        tmp = os.path.join(self.dir, "state.json.tmp")
        with open(tmp, "w") as f:
            json.dump(st, f, indent=1)
        os.replace(tmp, os.path.join(self.dir, "state.json"))

    def _install_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum, frame):
            raise SystemExit(128 + signum)

        for s in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[s] = signal.signal(s, handler)

    def _restore_signals(self):
        for s, h in self._old_handlers.items():
            signal.signal(s, h)
        self._old_handlers = {}

    def up(self):
        if os.geteuid() != 0:
            raise LabError("the lab needs root (namespaces, tc, nft)")
        if not os.path.exists("/dev/net/tun"):
            raise LabError("no /dev/net/tun")
        if any(h.loss_pct > 0 for h in self.hosts) and not shutil.which("nft"):
            raise LabError("topology %s has loss but nft is missing (apt-get install nftables)" %
                           self.base.name)
        relay = find_relay(self.relay_bin)
        if not self.detach:
            self._install_signals()
            atexit.register(self.down)
        self.prefix = self._alloc_prefix()
        self.dir = os.path.join(STATE_DIR, self.prefix)
        self._is_up = True
        try:
            self._build(relay)
        except BaseException:
            self.down()
            raise

    def _build(self, relay):
        n = self.n
        for i in self.host_ids():
            self.namespaces += [self.ns(i), self.router_ns(i)]
        self._save_state()  # before creating anything: `down --stale` can find it all
        for name in self.namespaces:
            sh(["ip", "netns", "add", name])
        self._allow_cc()
        for i in self.host_ids():
            h, r = self.ns(i), self.router_ns(i)
            hmac, rmac = "02:91:00:00:00:%02x" % i, "02:91:01:00:00:%02x" % i
            sysctl = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
            if self.tcp_cc:
                sysctl.append("net.ipv4.tcp_congestion_control=%s" % self.tcp_cc)
            sh(["ip", "netns", "exec", h, "sysctl", "-qw"] + sysctl)
            sh(["ip", "netns", "exec", r, "sysctl", "-qw"] + sysctl +
               ["net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0", "net.ipv4.conf.all.send_redirects=0",
                "net.ipv4.conf.default.send_redirects=0"])
            # Created straight into the two namespaces: nothing in the root namespace.
            sh(["ip", "link", "add", "wan0", "netns", h, "address", hmac, "type", "veth", "peer",
                "name", "toh", "netns", r, "address", rmac])
            batch_h = ["link set lo up", "addr add %s/24 dev wan0" % self.ip(i), "link set wan0 up"]
            if not self.gso:
                batch_h.append("link set dev wan0 gso_max_segs 1")
            # Every other host's address resolves to the router: all lab traffic
            # goes through the router, its tun0 and the relay (no ARP at all).
            batch_h += ["neigh replace %s lladdr %s dev wan0 nud permanent" % (self.ip(j), rmac)
                        for j in self.host_ids() if j != i]
            sh(["ip", "-n", h, "-batch", "-"], input="\n".join(batch_h) + "\n")
            batch_r = ["link set lo up", "link set toh up",
                       "neigh replace %s lladdr %s dev toh nud permanent" % (self.ip(i), hmac),
                       "route add %s/32 dev toh" % self.ip(i)]
            sh(["ip", "-n", r, "-batch", "-"], input="\n".join(batch_r) + "\n")
            spec = self.hosts[i - 1]
            sh(self._tbf(h, "wan0", spec.up_mbit))
            sh(self._tbf(r, "toh", spec.down_mbit))
            if spec.loss_pct > 0:
                x = int(round(spec.loss_pct / 200 * 1e6))  # half on the way out, half in
                rules = ("table ip wanlab {\n chain forward {\n"
                         "  type filter hook forward priority 0; policy accept;\n"
                         '  iifname "toh" numgen random mod 1000000 < %d counter drop\n'
                         '  oifname "toh" numgen random mod 1000000 < %d counter drop\n'
                         " }\n}\n" % (x, x))
                sh(["ip", "netns", "exec", r, "nft", "-f", "-"], input=rules)
        self._write_fakessh()
        self._start_relay(relay)
        for i in self.host_ids():
            r = self.router_ns(i)
            sh(["ip", "-n", r, "-batch", "-"],
               input="link set tun0 txqueuelen 1000\nlink set tun0 up\n"
                     "route add %s.0/24 dev tun0\n" % SUBNET)
        self._spread()
        self._save_state()

    def _spread(self):
        """A packet the relay writes is carried, in its write(), through the
        router, tbf, the veth and the receiving host's TCP, which may answer
        and send more: most of the lab's network stack would run in the relay's
        one thread. With RPS on every tun0 that work goes to the other CPUs'
        backlogs, and the relay, pinned to CPU 0, only moves packets."""
        cpus = sorted(os.sched_getaffinity(0))
        if not self.rps or len(cpus) < 2:
            return
        others = sum(1 << c for c in cpus[1:])
        os.sched_setaffinity(self.relay_pid, {cpus[0]})
        for i in self.host_ids():
            sh(["ip", "netns", "exec", self.router_ns(i), "sh", "-c",
                "echo %x > /sys/class/net/tun0/queues/rx-0/rps_cpus" % others])

    @staticmethod
    def _tbf(ns, dev, mbit):
        rate = mbit * 1e6  # bit/s
        burst = max(32 * 1024, int(rate / 8 * 0.005))  # 5 ms of tokens, at least 32 KiB
        return ["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                "%dbit" % int(rate), "burst", str(burst), "latency", "%dms" % TBF_LATENCY_MS]

    def _write_fakessh(self):
        script = """#!/bin/sh
# ssh stand-in for mpirun in lab %(prefix)s: runs the command in the host's
# namespace, in its own UTS namespace with hostname h<i>.
while [ "${1#-}" != "$1" ]; do shift; done   # drop ssh-style options
host=$1; shift
case "$host" in
  %(subnet)s.*) i=${host##*.} ;;
  h*) i=${host#h} ;;
  *) echo "fakessh: unknown host $host" >&2; exit 255 ;;
esac
[ -e "/run/netns/%(prefix)s-h$i" ] || { echo "fakessh: no host $host in lab %(prefix)s" >&2; exit 255; }
exec ip netns exec "%(prefix)s-h$i" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "h$i" "$@"
""" % {"prefix": self.prefix, "subnet": SUBNET}
        with open(self.fakessh, "w") as f:
            f.write(script)
        os.chmod(self.fakessh, 0o755)

    def _start_relay(self, relay):
        argv = [relay, "--rt", str(self.rt_prio)] if self.rt_prio else [relay]
        if not self.detach:
            argv.append("--die-with-parent")
        if not self.offload:
            argv.append("--no-offload")
        for i in self.host_ids():
            argv.append("/run/netns/%s,%s,%d" % (self.router_ns(i), self.ip(i),
                                                 int(round(self.hosts[i - 1].delay_ms * 1000))))
        log = open(os.path.join(self.dir, "relay.log"), "w")
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        log.close()
        self.relay = p
        self.relay_pid = p.pid
        self.relay_start = proc_start_time(p.pid)
        self._save_state()
        ready, _, _ = select.select([p.stdout], [], [], 10)
        line = p.stdout.readline().decode() if ready else ""
        p.stdout.close()
        if line.strip() != "ready":
            raise LabError("relay did not start:\n" + open(os.path.join(self.dir, "relay.log")).read())

    # ------------------------------------------------------------ down

    def down(self):
        """Removes everything this lab created; safe to call more than once."""
        if not self._is_up:
            return
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM,
                                                        signal.SIGHUP})
        try:
            for p in self._procs:
                if p.poll() is None:
                    kill_group(p, grace=1.0)
            teardown(self.prefix, self.namespaces, self.relay_pid, self.relay_start, self.dir)
            self._restore_allowed_cc()
            if self.relay is not None:
                try:
                    self.relay.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            self._is_up = False
        finally:
            self._restore_signals()
            try:
                atexit.unregister(self.down)
            except Exception:
                pass
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    ALLOWED_CC = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

    def _allow_cc(self):
        """A namespace may only default to a congestion control the machine
        allows (tcp_allowed_congestion_control): the lab adds tcp_cc to that
        list while it is up, and down() puts the list back (not `down --stale`
        after a SIGKILL: the old list lived in the owner; left wider, it only
        allows more)."""
        if not self.tcp_cc:
            return
        allowed = open(self.ALLOWED_CC).read().split()
        if self.tcp_cc in allowed:
            return
        self._allowed_cc_before = " ".join(allowed)
        with open(self.ALLOWED_CC, "w") as f:
            f.write(" ".join(allowed + [self.tcp_cc]))

    def _restore_allowed_cc(self):
        if self._allowed_cc_before is None:
            return
        with open(self.ALLOWED_CC, "w") as f:
            f.write(self._allowed_cc_before)
        self._allowed_cc_before = None

    # ------------------------------------------------------------ describe

    def tcp_cc_in_use(self):
        """The congestion control TCP uses in host 1 (every host has the same)."""
        out = subprocess.run(["ip", "netns", "exec", self.ns(1), "sysctl", "-n",
                              "net.ipv4.tcp_congestion_control"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"

    def describe(self):
        lines = ["lab %s: topology %s, scale %g, %d hosts, TCP congestion control %s%s" % (
            self.prefix, self.base.name, self.scale, self.n, self.tcp_cc_in_use(),
            "" if self.tcp_cc else " (the machine's default)")]
        for i in self.host_ids():
            h = self.hosts[i - 1]
            lines.append("  h%d %-10s up %7.2f Mbit/s  down %7.2f Mbit/s  delay %5.1f ms  loss %.2f%%"
                         "  (netns %s)" % (i, self.ip(i), h.up_mbit, h.down_mbit, h.delay_ms,
                                           h.loss_pct, self.ns(i)))
        return "\n".join(lines)


def kill_group(p, grace=2.0):
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def teardown(prefix, namespaces, relay_pid, relay_start, state_dir):
    """Removes one lab: only names under its own prefix."""
    if not PREFIX_RE.match(prefix or ""):
        raise LabError("refusing to tear down %r: not a lab prefix" % prefix)
    own = [ns for ns in namespaces if ns.startswith(prefix + "-")]
    existing = [ns for ns in own if os.path.exists(os.path.join("/run/netns", ns))]
    # Processes still inside the lab's namespaces (mpirun, orted, ranks...).
    pids = []
    for ns in existing:
        r = sh(["ip", "netns", "pids", ns], check=False)
        pids += [int(x) for x in r.stdout.split() if x.isdigit()]
    kill_wait(pids)
    if relay_pid and alive(relay_pid, relay_start):
        kill_wait([relay_pid], grace=3.0)
    for ns in existing:
        sh(["ip", "netns", "del", ns], check=False)
    if state_dir and os.path.basename(state_dir) == prefix and \
            os.path.dirname(state_dir) == STATE_DIR:
        shutil.rmtree(state_dir, ignore_errors=True)


def parse_relay_stats(text):
    """The last counters block the relay printed, as a dict."""
    blocks = text.split("wanrelay: stats")
    if len(blocks) < 2:
        return {}
    last = blocks[-1]
    res = {"hosts": {}}
    for m in re.finditer(r"wanrelay: host (\S+) (.*)", last):
        kv = m.group(2).split()
        res["hosts"][m.group(1)] = {kv[k]: float(kv[k + 1]) for k in range(0, len(kv) - 1, 2)}
    m = re.search(r"wanrelay: total (.*)", last)
    if m:
        kv = m.group(1).split()
        res.update({kv[k]: float(kv[k + 1]) for k in range(0, len(kv) - 1, 2)})
    return res


def lab_states():
    res = []
    if not os.path.isdir(STATE_DIR):
        return res
    for p in sorted(os.listdir(STATE_DIR)):
        path = os.path.join(STATE_DIR, p, "state.json")
        if not PREFIX_RE.match(p):
            continue
        try:
            with open(path) as f:
                st = json.load(f)
        except (OSError, ValueError):
            st = {"prefix": p, "namespaces": [], "owner_pid": None}
        res.append(st)
    return res


def teardown_state(st):
    prefix = st["prefix"]
    namespaces = st.get("namespaces") or []
    if os.path.isdir("/run/netns"):  # also any namespace of this prefix not yet recorded
        namespaces = sorted(set(namespaces) | {e for e in os.listdir("/run/netns")
                                               if re.match(re.escape(prefix) + r"-[hr]\d+$", e)})
    teardown(prefix, namespaces, st.get("relay_pid"), st.get("relay_start"),
             os.path.join(STATE_DIR, prefix))


# ---------------------------------------------------------------- check


def ping(lab, i, j, count, interval):
    r = lab.run(i, ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "2",
                    lab.ip(j)], timeout=count * interval + 30)
    m, t = PING_RE.search(r.stdout), RTT_RE.search(r.stdout)
    if not m:
        raise LabError("ping h%d->h%d failed:\n%s%s" % (i, j, r.stdout, r.stderr))
    sent, got = int(m.group(1)), int(m.group(2))
    times = sorted(float(x) for x in TIME_RE.findall(r.stdout))
    # The median judges the emulated delay: one echo the shared CPUs
    # scheduled late moves the mean of ten by milliseconds, not the median.
    median = times[len(times) // 2] if times else float("nan")
    return {"avg_ms": float(t.group(2)) if t else float("nan"),
            "min_ms": float(t.group(1)) if t else float("nan"),
            "median_ms": median,
            "loss": 1 - got / sent if sent else 1.0}


def transfers(lab, flows, seconds, port=5201):
    """Runs TCP flows (src, dst) at the same time for `seconds`; returns each
    flow's goodput in Mbit/s, measured at the receiver after the first
    second (slow start)."""
    me = os.path.abspath(__file__)
    sinks, sources = [], []
    for k, (src, dst) in enumerate(flows):
        sinks.append(lab.popen(dst, [sys.executable, me, "_sink", lab.ip(dst), str(port + k),
                                     "1.0"], hostname=False, stdout=subprocess.PIPE, text=True))
    for k, (src, dst) in enumerate(flows):
        sources.append(lab.popen(src, [sys.executable, me, "_source", lab.ip(dst), str(port + k),
                                       str(seconds)], hostname=False, stdout=subprocess.DEVNULL))
    res = []
    for k, p in enumerate(sinks):
        out, _ = p.communicate(timeout=seconds + 60)
        try:
            res.append(json.loads(out)["mbit"])
        except (ValueError, KeyError):
            res.append(float("nan"))
    for p in sources:
        p.wait(timeout=30)
    return res


def sink_main(addr, port, skip):
    """Receives one connection; prints its goodput as the median of the
    rates of 0.25 s intervals after the first `skip` seconds (median:
    the end of slow start, a burst of loss recovery or a late read land in
    one interval and do not move it), and the mean over the same span."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(port)))
    s.listen(1)
    s.settimeout(30)
    c, _ = s.accept()
    c.settimeout(30)
    buf = bytearray(1 << 18)
    t0, total, marks, step = None, 0, [], 0.25
    while True:
        n = c.recv_into(buf)
        if not n:
            break
        now = time.monotonic()
        if t0 is None:
            t0, nxt = now, float(skip)
        total += n
        if now - t0 >= nxt:
            marks.append((now - t0, total))
            nxt += step
    rates = [(b[1] - a[1]) * 8 / (b[0] - a[0]) / 1e6 for a, b in zip(marks, marks[1:])]
    rates.sort()
    med = rates[len(rates) // 2] if rates else float("nan")
    mean = ((marks[-1][1] - marks[0][1]) * 8 / (marks[-1][0] - marks[0][0]) / 1e6
            if len(marks) > 1 else float("nan"))
    print(json.dumps({"mbit": med, "mean_mbit": mean, "bytes": total}))


def source_main(addr, port, seconds):
    deadline = time.monotonic() + 10
    while True:
        try:
            s = socket.create_connection((addr, int(port)), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    data = b"\0" * (1 << 18)
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        s.sendall(data)
    s.close()


def retry(tries, measure):
    """Runs measure() -> (good, line) up to `tries` times, until one is
    good; prints every line (a retried one marked "retry"). The lab shares
    its CPUs with whatever else runs: a relay thread scheduled late shows
    as a slow ping or a slow second of TCP, once. A number that is off on
    every try is a lab that is off."""
    for k in range(tries):
        good, line = measure()
        print(line + ("" if good else (" OFF" if k == tries - 1 else " OFF (retry)")) +
              (" ok" if good else ""))
        sys.stdout.flush()
        if good:
            return True
    return False


def check(topology, scale, seconds, strict, relay=None, tries=1):
    ok = True
    with Lab(topology, scale=scale, relay=relay) as lab:
        print(lab.describe())
        topo = lab.topology
        # RTT and loss on every pair, at idle.
        lossy = any(h.loss_pct > 0 for h in lab.hosts)
        count, interval = (1000, 0.005) if lossy else (10, 0.1)
        pairs = [(i, j) for i in lab.host_ids() for j in lab.host_ids() if i < j]

        def rtt(i, j, r):
            want = 2 * topo.path_delay_ms(i, j)
            want_loss = 1 - (1 - topo.path_loss(i, j)) * (1 - topo.path_loss(j, i))
            # loss: within 4 standard deviations of the binomial, plus 0.2 %
            sd = (want_loss * (1 - want_loss) / count) ** 0.5
            good = abs(r["median_ms"] - want) <= max(1.5, 0.05 * want) and \
                abs(r["loss"] - want_loss) <= 4 * sd + 0.002
            return good, ("check rtt h%d-h%d median_ms=%.2f avg_ms=%.2f min_ms=%.2f "
                          "expect_ms=%.1f ping_loss_pct=%.2f expect_loss_pct=%.2f" %
                          (i, j, r["median_ms"], r["avg_ms"], r["min_ms"], want,
                           100 * r["loss"], 100 * want_loss))

        results = {}

        def one(pair):
            results[pair] = ping(lab, pair[0], pair[1], count, interval)

        threads = [threading.Thread(target=one, args=(p,)) for p in pairs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for (i, j) in pairs:
            first = [results[(i, j)]]  # the concurrent measurement, then one pair alone

            def measure(i=i, j=j, first=first):
                r = first.pop() if first else ping(lab, i, j, count, interval)
                return rtt(i, j, r)

            ok &= retry(tries, measure)
        # Goodput of each host's upload and download, one flow at a time,
        # each against the peer whose opposite rate is highest.
        floor = 0.85 if lossy else 0.9  # of the goodput a link can carry
        for i in lab.host_ids():
            for direction in ("up", "down"):
                others = [j for j in lab.host_ids() if j != i]
                if direction == "up":
                    j = max(others, key=lambda k: lab.hosts[k - 1].down_mbit)
                    flow = (i, j)
                    rate = min(lab.hosts[i - 1].up_mbit, lab.hosts[j - 1].down_mbit)
                else:
                    j = max(others, key=lambda k: lab.hosts[k - 1].up_mbit)
                    flow = (j, i)
                    rate = min(lab.hosts[i - 1].down_mbit, lab.hosts[j - 1].up_mbit)

                def measure(i=i, direction=direction, flow=flow, rate=rate):
                    got = transfers(lab, [flow], seconds)[0]
                    want = rate * GOODPUT
                    return (floor * want <= got <= 1.05 * want,
                            "check goodput h%d %s via h%d->h%d mbit=%.2f configured=%.2f "
                            "goodput_max=%.2f ratio=%.3f" % (i, direction, flow[0], flow[1],
                                                             got, rate, want, got / rate))

                ok &= retry(tries, measure)
        # All hosts at once, each sending to the next (every upload and every
        # download busy): the relay must keep up, at little CPU.
        flows = [(i, i % lab.n + 1) for i in lab.host_ids()]

        def concurrent():
            cpu0, t0 = lab.relay_cpu_s(), time.monotonic()
            got = transfers(lab, flows, seconds)
            cpu = (lab.relay_cpu_s() - cpu0) / (time.monotonic() - t0)
            good, lines = True, []
            for (a, b), g in zip(flows, got):
                rate = min(lab.hosts[a - 1].up_mbit, lab.hosts[b - 1].down_mbit)
                this = g >= floor * rate * GOODPUT
                good &= this
                lines.append("check concurrent h%d->h%d mbit=%.2f configured=%.2f ratio=%.3f %s" %
                             (a, b, g, rate, g / rate, "ok" if this else "low"))
            stats = lab.relay_stats()
            lines.append("check relay cpu_pct_of_one_core=%.1f released=%d late_mean_us=%.1f "
                         "late_max_us=%.1f late_over_1ms=%d drop_full=%d queue_peak=%d" % (
                             100 * cpu, stats.get("released", -1), stats.get("late_mean_us", -1),
                             stats.get("late_max_us", -1), stats.get("late_over_1ms", -1),
                             stats.get("drop_full", -1), stats.get("queue_peak", -1)))
            lines.append("check concurrent all")
            return good, "\n".join(lines)

        ok &= retry(tries, concurrent)
        for i in lab.host_ids():
            tc = lab.tc_stats(i)
            print("check tc h%d up_drops=%d down_drops=%d nft_drops=%d" %
                  (i, tc.get("up_drops", -1), tc.get("down_drops", -1), lab.nft_drops(i)))
    print("check %s" % ("PASS" if ok else "FAIL (some numbers are off)"))
    return 0 if ok or not strict else 1


def unavailable():
    """Why no lab can be built here, or None."""
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun"
    for tool in ("ip", "tc", "ping", "unshare"):
        if not shutil.which(tool):
            return "no %s" % tool
    return None


# ---------------------------------------------------------------- CLI


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="build a lab and leave it up")
    u.add_argument("topology")
    u.add_argument("--scale", type=float, default=1.0)
    u.add_argument("--relay", help="wanrelay binary (default: built or compiled)")
    e = sub.add_parser("exec", help="run a command in a host: exec PREFIX I -- CMD...")
    e.add_argument("prefix")
    e.add_argument("host", type=int)
    e.add_argument("argv", nargs=argparse.REMAINDER)
    d = sub.add_parser("down", help="tear down labs this tool built")
    d.add_argument("prefix", nargs="?")
    d.add_argument("--stale", action="store_true", help="labs whose owner process is gone")
    d.add_argument("--all", action="store_true", help="every lab this tool built")
    sub.add_parser("list", help="labs up now")
    c = sub.add_parser("check", help="build a lab, measure rates and RTTs, tear it down")
    c.add_argument("topology")
    c.add_argument("--scale", type=float, default=1.0)
    c.add_argument("--seconds", type=float, default=4.0, help="per transfer")
    c.add_argument("--strict", action="store_true", help="exit 1 if a number is off")
    c.add_argument("--tries", type=int, default=1, metavar="K",
                   help="measure a number that is off up to K times in all (default 1)")
    c.add_argument("--skip-unavailable", action="store_true",
                   help="exit 77 (skipped) where no lab can be built: not root, no TUN")
    c.add_argument("--relay")
    for hidden in ("_sink", "_source"):
        h = sub.add_parser(hidden)
        h.add_argument("args", nargs=3)
    a = ap.parse_args(argv)

    try:
        if a.cmd == "_sink":
            sink_main(*a.args)
        elif a.cmd == "_source":
            source_main(*a.args)
        elif a.cmd == "up":
            lab = Lab(a.topology, scale=a.scale, relay=a.relay, detach=True)
            lab.up()
            me = os.path.abspath(__file__)
            print(lab.describe())
            print("""
run a command in host i:  %(me)s exec %(p)s <i> -- CMD...
                     or:  ip netns exec %(p)s-h<i> CMD...
Open MPI, one rank per host (from host 1):
  ip netns exec %(p)s-h1 mpirun --hostfile %(hf)s -np %(n)d %(mpi)s PROGRAM
relay log: %(dir)s/relay.log
tear down:  %(me)s down %(p)s""" % {"me": me, "p": lab.prefix, "hf": lab.hostfile(), "n": lab.n,
                                     "mpi": shlex.join(lab.mpirun_args()), "dir": lab.dir})
        elif a.cmd == "exec":
            argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
            if not argv:
                ap.error("exec needs a command")
            st = {s["prefix"]: s for s in lab_states()}.get(a.prefix)
            if not st:
                raise LabError("no lab %s (see: wanlab.py list)" % a.prefix)
            ns = "%s-h%d" % (a.prefix, a.host)
            if ns not in st["namespaces"]:
                raise LabError("lab %s has no host %d" % (a.prefix, a.host))
            os.execvp("ip", ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                             'hostname "$0" && exec "$@"', "h%d" % a.host] + argv)
        elif a.cmd == "list":
            for st in lab_states():
                owner = st.get("owner_pid")
                live = owner and alive(owner, st.get("owner_start"))
                print("%s topology=%s scale=%s hosts=%d owner=%s %s" % (
                    st["prefix"], st.get("topology"), st.get("scale"), len(st.get("hosts") or []),
                    owner, "up" if live else "STALE"))
        elif a.cmd == "down":
            states = lab_states()
            if a.all:
                pick = states
            elif a.stale:
                pick = [s for s in states
                        if not (s.get("owner_pid") and alive(s["owner_pid"], s.get("owner_start")))]
            elif a.prefix:
                pick = [s for s in states if s["prefix"] == a.prefix]
                if not pick:
                    raise LabError("no lab %s (see: wanlab.py list)" % a.prefix)
            else:
                ap.error("down needs a prefix, --stale or --all")
            for st in pick:
                teardown_state(st)
                print("removed lab %s" % st["prefix"])
        elif a.cmd == "check":
            if a.skip_unavailable:
                why = unavailable()
                if why:
                    print("wanlab: skipped: %s" % why)
                    return 77
            return check(a.topology, a.scale, a.seconds, a.strict, a.relay, max(1, a.tries))
    except LabError as e:
        print("wanlab: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
