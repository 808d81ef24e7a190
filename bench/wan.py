#!/usr/bin/python3
"""WAN benchmark: dedmpi against Open MPI and Gloo on the same emulated links.

For each topology (tests/wan/topologies/<name>.toml) it builds the WAN lab
(tests/wan/wanlab.py: one network namespace per host, tbf rates, relay
delay, nftables loss) and, on those links in the same run, times a 32 MiB
float32 all-reduce (8 Mi elements) across the hosts, one process per host:

  dedmpi_s        one single-rank mpirun job per host, libdedmpi.so preloaded,
                  the jobs forming a swarm (DEDMPI_PLAN=lp)
  dedmpi_fp16_s   the same with DEDMPI_COMPRESS=fp16 (issue 23)
  dedmpi_int8_s   ... DEDMPI_COMPRESS=int8
  dedmpi_topk_s   ... DEDMPI_COMPRESS=topk (1 %)
  equal_s         the same as dedmpi_s with DEDMPI_PLAN=equal
  openmpi_s       Open MPI's own MPI_Allreduce, one rank per host, its
                  default algorithm choice (tuned: Rabenseifner here)
  openmpi_ring_s  the same with the ring forced (coll_tuned algorithm 4)
  gloo_s          torch.distributed's Gloo all_reduce
  bound_s         N·max(1/min up, 2(n-1)/Σ up, 1/min down, 2(n-1)/Σ down)

Each system runs --warmup untimed reps (default 3) and --reps timed reps;
a rep's time is its slowest process's (for dedmpi, the max over the 4 jobs
of that rep), and every system reports its best rep. Three warm-ups, not
one, because a dedmpi run's first calls do its start-up once: the first
round founds the run's initial state (the other jobs load it, and start
the second call ~0.1 s after the founder, who waits for them), the third
call is the first whose training step is known, so the first with error
feedback, whose residual's pages are first touched then (40 to 230 ms).
What a training run does on every step is the fourth call on. A dedmpi column in which some job did
not contribute to a timed rep (it came late and fetched the result, or
kept its own values) timed a smaller swarm: it is reported as failed
(nan), with the reps and hosts. Prints one line per topology:

  wan topology=<name> dedmpi_s=.. dedmpi_fp16_s=.. dedmpi_int8_s=..
      dedmpi_topk_s=.. equal_s=.. openmpi_s=.. openmpi_ring_s=.. gloo_s=..
      bound_s=.. speedup_vs_openmpi=.. of_bound=.. peer_s=.. x_none=..
      x_fp16=.. x_int8=.. x_topk=.. scale=..

where peer_s is the fastest uncompressed peer system's time (Open MPI,
its ring, Gloo) and x_<codec> each dedmpi column's speedup against it
(peer_s / time; x_none is the uncompressed dedmpi's).

(one line; for lossy also lossy_keeps = dedmpi's throughput there relative
to homogeneous, when both ran in this invocation), then lp_bench's lines:
the LP's solve time for 16, 64 and 256 peers. Lines starting with '#'
are context. Needs root, BUILD_DIR (default ./build) with shim/libdedmpi.so
and bench/ar_bench, Open MPI, python3-torch and nftables (lossy).

  /usr/bin/python3 bench/wan.py [--topology NAME]... [--scale F] [--reps K] [--warmup W]
      [--systems LIST] [--logs DIR] [--ded-env DEDMPI_NAME=VALUE]...

The topologies' rates are taken as they are (--scale 1, the default;
delays and loss are never scaled). Issue 20 measured its ratios at half
the rates (--scale 0.5), where the lab's own per-packet cost on this
2-core machine (tbf, veth and the delay relay) stays out of the way;
issue 23 asks for the full rates, and the '#' lines say how busy the
relay was and how many packets it released late, so a run the lab could
not keep up with shows it.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "wan"))
import wanlab  # noqa: E402

BUILD = os.path.abspath(os.environ.get("BUILD_DIR", os.path.join(ROOT, "build")))
LIB = os.path.join(BUILD, "shim", "libdedmpi.so")
BENCH = os.path.join(BUILD, "bench", "ar_bench")
LP_BENCH = os.path.join(BUILD, "bench", "lp_bench")
GLOO = os.path.join(ROOT, "bench", "wan_gloo.py")
COUNT = 8 << 20  # float32 elements: 32 MiB
NBYTES = COUNT * 4
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
SYSTEMS = ("dedmpi", "dedmpi_fp16", "dedmpi_int8", "dedmpi_topk", "equal", "openmpi",
           "openmpi_ring", "gloo")
CODECS = ("none", "fp16", "int8", "topk")
PEERS = ("openmpi", "openmpi_ring", "gloo")  # the uncompressed systems dedmpi is measured against
DEFAULT_TOPOLOGIES = ("homogeneous", "heterogeneous", "lossy")
REP_RE = re.compile(r"^rep (\d+) (\S+)", re.M)
# A dedmpi job's log lines for a round it did not contribute to.
MISSED_RE = re.compile(r"round (\d+): (?:fetched the result of \d+ members \(this job came late\)"
                       r"|no result within the bound|the swarm is already at round)")
DED_ENV = {}  # --ded-env: extra DEDMPI_* settings for both dedmpi systems
WARMUP = 3  # --warmup: untimed reps before the timed ones, every system alike


def ctx(msg):
    print("# " + msg, flush=True)


def reps_of(out):
    return {int(i): float(t) for i, t in REP_RE.findall(out)}


class Failed(Exception):
    pass


def wait_all(procs, timeout, what, logdir):
    """Waits for Popen objects whose stdout/stderr go to files; returns their
    stdout texts. On a timeout or a failure kills them all and raises."""
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for p in procs:
            if p.poll() is None:
                wanlab.kill_group(p, grace=1.0)
        raise Failed("%s: timed out after %.0f s (logs: %s)" % (what, timeout, logdir))
    outs = [open(p.out_path).read() for p in procs]
    bad = [p for p in procs if p.returncode != 0]
    if bad:
        tail = "\n".join("--- %s rc=%s\n%s" % (p.out_path, p.returncode,
                                               open(p.err_path).read()[-2000:]) for p in bad)
        raise Failed("%s: failed (logs: %s)\n%s" % (what, logdir, tail))
    return outs


def spawn(lab, i, argv, env, logdir, name):
    out_path = os.path.join(logdir, name + ".out")
    err_path = os.path.join(logdir, name + ".err")
    p = lab.popen(i, argv, env=env, stdout=open(out_path, "w"), stderr=open(err_path, "w"),
                  stdin=subprocess.DEVNULL, cwd=logdir)
    p.out_path, p.err_path = out_path, err_path
    return p


def run_openmpi(lab, reps, timeout, logdir, ring):
    argv = ["mpirun", "--hostfile", lab.hostfile(), "-np", str(lab.n), "--bind-to", "none"]
    argv += lab.mpirun_args()
    if ring:
        argv += ["--mca", "coll_tuned_use_dynamic_rules", "1",
                 "--mca", "coll_tuned_allreduce_algorithm", "4"]
    argv += [BENCH, "--count", str(COUNT), "--reps", str(reps), "--warmup", str(WARMUP)]
    name = "openmpi_ring" if ring else "openmpi"
    out = wait_all([spawn(lab, 1, argv, MPI_ENV, logdir, name)], timeout, name, logdir)[0]
    r = reps_of(out)
    return [r[k] for k in sorted(r)]


def run_gloo(lab, reps, timeout, logdir, port):
    procs = []
    for i in lab.host_ids():
        argv = [sys.executable, GLOO, "--rank", str(i - 1), "--world", str(lab.n),
                "--master", "%s:%d" % (lab.ip(1), port), "--count", str(COUNT),
                "--reps", str(reps), "--warmup", str(WARMUP), "--timeout", str(int(timeout))]
        procs.append(spawn(lab, i, argv, {"GLOO_SOCKET_IFNAME": "wan0", "OMP_NUM_THREADS": "1"},
                           logdir, "gloo-%d" % i))
    out = wait_all(procs, timeout, "gloo", logdir)[0]
    r = reps_of(out)
    return [r[k] for k in sorted(r)]


def run_dedmpi(lab, reps, timeout, logdir, port, plan, round_timeout_s, codec="none"):
    procs = []
    run = "wan-%s-%s-%s-%d" % (lab.prefix, plan, codec, port)
    for i in lab.host_ids():
        env = {"LD_PRELOAD": LIB, "DEDMPI_RUN": run,
               "DEDMPI_LISTEN": "%s:%d" % (lab.ip(i), port),
               "DEDMPI_JOIN": "%s:%d" % (lab.ip(1), port),
               "DEDMPI_MIN_PEERS": str(lab.n), "DEDMPI_LOG": "info", "DEDMPI_PLAN": plan,
               "DEDMPI_ROUND_TIMEOUT": "%ds" % round_timeout_s, "DEDMPI_COMPRESS": codec}
        env.update(DED_ENV)
        argv = ["mpirun", "-np", "1", "--bind-to", "none"]
        for k, v in env.items():
            argv += ["-x", "%s=%s" % (k, v)]
        argv += [BENCH, "--count", str(COUNT), "--reps", str(reps), "--warmup", str(WARMUP)]
        procs.append(spawn(lab, i, argv, MPI_ENV, logdir, "dedmpi-%s-%s-%d" % (plan, codec, i)))
    outs = wait_all(procs, timeout, "dedmpi (%s, %s)" % (plan, codec), logdir)
    # Rounds 0 .. WARMUP - 1 are the warm-up; rep k is round k + WARMUP. A rep in which a job
    # contributed nothing (it came late, or kept its own values) timed a
    # smaller swarm: the column is not valid.
    missed = {}
    for i, p in zip(lab.host_ids(), procs):
        for rnd in MISSED_RE.findall(open(p.err_path).read()):
            if int(rnd) >= WARMUP:
                missed.setdefault(int(rnd) - WARMUP, []).append("h%d" % i)
    if missed:
        raise Failed("dedmpi (%s): not every job contributed to every timed rep (%s; logs: %s)" % (
            plan, "; ".join("rep %d: %s" % (k, ",".join(v)) for k, v in sorted(missed.items())),
            logdir))
    per_job = [reps_of(o) for o in outs]
    common = sorted(set.intersection(*(set(r) for r in per_job)))
    if len(common) < reps:
        raise Failed("dedmpi (%s): only %d of %d reps in every job's output (logs: %s)" %
                     (plan, len(common), reps, logdir))
    # Rep k of every job is the same swarm round: it took as long as its slowest job saw.
    return [max(r[k] for r in per_job) for k in common]


def machine_idle(seconds=1.0):
    def snap():
        v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return v[3] + v[4], sum(v)
    i0, t0 = snap()
    time.sleep(seconds)
    i1, t1 = snap()
    return (i1 - i0) / max(1, t1 - t0)


def fmt(x):
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else "%.3f" % x


def bench_topology(name, args, results, logroot):
    topo = wanlab.load_topology(name)
    with wanlab.Lab(topo, scale=args.scale, tcp_cc=args.tcp_cc) as lab:
        t = lab.topology
        bound = t.bound_s(NBYTES)
        up_min = min(h.up_Bps for h in t.hosts)
        ring_bound = 1.5 * NBYTES / up_min  # equal shares, any ring/Rabenseifner
        ctx(lab.describe().replace("\n", "\n# "))
        ctx("topology=%s bound_s=%.3f goodput_bound_s=%.3f equal_share_bound_s=%.3f "
            "(rates after scale %g; goodput = x1514/1448)" %
            (name, bound, bound * 1514 / 1448, ring_bound, args.scale))
        idle = machine_idle()
        ctx("machine idle before start: %.0f%% of 2 cores%s" % (
            100 * idle, "  WARNING: something else is running; times will suffer" if idle < 0.8
            else ""))
        if logroot:
            os.makedirs(logroot, exist_ok=True)
        logdir = tempfile.mkdtemp(prefix="wanbench-%s-" % name, dir=logroot)
        per_rep = max(20.0, 6 * ring_bound)
        timeout = 120 + (args.reps + WARMUP) * per_rep
        round_timeout = int(max(60, 4 * ring_bound))
        best = {}
        port = 7700
        for system in args.systems:
            port += 1
            cpu0 = lab.relay_cpu_s()
            stats0 = lab.relay_stats()
            t0 = time.monotonic()
            try:
                if system.startswith("dedmpi"):
                    times = run_dedmpi(lab, args.reps, timeout, logdir, port, "lp", round_timeout,
                                       system[7:] or "none")
                elif system == "equal":
                    times = run_dedmpi(lab, args.reps, timeout, logdir, port, "equal",
                                       round_timeout)
                elif system == "openmpi":
                    times = run_openmpi(lab, args.reps, timeout, logdir, ring=False)
                elif system == "openmpi_ring":
                    times = run_openmpi(lab, args.reps, timeout, logdir, ring=True)
                else:
                    times = run_gloo(lab, args.reps, timeout, logdir, port)
            except Failed as e:
                ctx("%s FAILED: %s" % (system, str(e).replace("\n", "\n# ")))
                times = []
            wall = time.monotonic() - t0
            stats = lab.relay_stats()
            late = stats.get("late_over_1ms", 0) - stats0.get("late_over_1ms", 0)
            rel = stats.get("released", 0) - stats0.get("released", 0)
            small = stats.get("small_pkts", 0) - stats0.get("small_pkts", 0)
            gso = stats.get("gso_pkts", 0) - stats0.get("gso_pkts", 0)
            wake = stats.get("wakeups", 0) - stats0.get("wakeups", 0)
            cpu = (lab.relay_cpu_s() or 0) - (cpu0 or 0)
            best[system] = min(times) if times else float("nan")
            ctx("%s %s reps=%s best=%s wall_s=%.1f relay: cpu_pct=%.1f packets=%d late_over_1ms=%d "
                "small=%d gso=%d wakeups=%d" %
                (name, system, ",".join("%.3f" % x for x in times), fmt(best[system]), wall,
                 100 * cpu / max(wall, 1e-9), rel, late, small, gso, wake))
        for i in lab.host_ids():
            tc = lab.tc_stats(i)
            ctx("%s h%d tbf up_drops=%d down_drops=%d nft_drops=%d" % (
                name, i, tc.get("up_drops", -1), tc.get("down_drops", -1), lab.nft_drops(i)))
    ded = best.get("dedmpi", float("nan"))
    have = [best[k] for k in ("openmpi", "openmpi_ring") if not math.isnan(best.get(k, math.nan))]
    ompi = min(have) if have else math.nan
    peers = [best[k] for k in PEERS if not math.isnan(best.get(k, math.nan))]
    peer = min(peers) if peers else math.nan
    speedups = []
    for c in CODECS:
        t = best.get("dedmpi" if c == "none" else "dedmpi_" + c, math.nan)
        speedups.append("x_%s=%s" % (c, fmt(peer / t if t > 0 else math.nan)))
    speedups = " ".join(speedups)
    line = ("wan topology=%s dedmpi_s=%s dedmpi_fp16_s=%s dedmpi_int8_s=%s dedmpi_topk_s=%s "
            "equal_s=%s openmpi_s=%s openmpi_ring_s=%s gloo_s=%s "
            "bound_s=%s speedup_vs_openmpi=%s of_bound=%s peer_s=%s %s scale=%g" % (
                name, fmt(ded), fmt(best.get("dedmpi_fp16")), fmt(best.get("dedmpi_int8")),
                fmt(best.get("dedmpi_topk")), fmt(best.get("equal")), fmt(best.get("openmpi")),
                fmt(best.get("openmpi_ring")), fmt(best.get("gloo")), fmt(bound),
                fmt(ompi / ded if ded > 0 else float("nan")),
                fmt(bound / ded if ded > 0 else float("nan")), fmt(peer), speedups, args.scale))
    results[name] = best
    if name == "lossy" and "homogeneous" in results:
        homog = results["homogeneous"].get("dedmpi", float("nan"))
        line += " lossy_keeps=%s" % fmt(homog / ded if ded > 0 else float("nan"))
    print(line, flush=True)


def main():
    global WARMUP
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", action="append", help="repeatable; default: %s" %
                    ", ".join(DEFAULT_TOPOLOGIES))
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiplies every rate (default 1: the topologies' own)")
    ap.add_argument("--reps", type=int, default=3, help="timed reps per system (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=WARMUP,
                    help="untimed reps before them, every system alike (default %d)" % WARMUP)
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="subset to run, comma-separated (default: all)")
    ap.add_argument("--logs", default=None, help="folder for the runs' logs (default: /tmp)")
    ap.add_argument("--ded-env", action="append", default=[], metavar="NAME=VALUE",
                    help="repeatable: a DEDMPI_* setting for the dedmpi jobs (e.g. DEDMPI_STREAMS=1)")
    ap.add_argument("--tcp-cc", default=None, metavar="NAME",
                    help="TCP congestion control in every host, for every system alike (default: "
                    "the machine's, net.ipv4.tcp_congestion_control; see tcp_available_"
                    "congestion_control)")
    args = ap.parse_args()
    if args.tcp_cc is not None:
        avail = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
        if args.tcp_cc not in avail:
            ap.error("--tcp-cc %s: not available here (have: %s)" % (args.tcp_cc, " ".join(avail)))
    if args.warmup < 1 or args.reps < 1:
        ap.error("--warmup and --reps want at least 1")
    WARMUP = args.warmup
    for kv in args.ded_env:
        k, eq, v = kv.partition("=")
        if not eq or not k.startswith("DEDMPI_"):
            ap.error("--ded-env wants DEDMPI_NAME=VALUE, got %r" % kv)
        DED_ENV[k] = v
    args.systems = [s for s in args.systems.split(",") if s]
    for s in args.systems:
        if s not in SYSTEMS:
            ap.error("unknown system %r (have: %s)" % (s, ", ".join(SYSTEMS)))
    topologies = args.topology or list(DEFAULT_TOPOLOGIES)
    # lossy_keeps compares with homogeneous: run that first when both are asked for.
    if "lossy" in topologies and "homogeneous" in topologies and \
            topologies.index("homogeneous") > topologies.index("lossy"):
        topologies.remove("homogeneous")
        topologies.insert(topologies.index("lossy"), "homogeneous")
    if os.geteuid() != 0:
        sys.exit("bench/wan.py needs root (network namespaces)")
    need = [LIB, BENCH] if set(args.systems) - {"gloo"} else []
    for path in need:
        if not os.path.exists(path):
            sys.exit("missing %s: build first (BUILD_DIR=%s)" % (path, BUILD))
    if "gloo" in args.systems:
        r = subprocess.run([sys.executable, "-c", "import torch.distributed as d; "
                            "assert d.is_available() and d.is_gloo_available()"],
                           capture_output=True)
        if r.returncode != 0:
            sys.exit("gloo needs torch with Gloo for %s (apt-get install python3-torch)" %
                     sys.executable)
    ctx("dedmpi WAN benchmark: %d MiB float32 all-reduce, %d reps + %d warm-up, best rep, "
        "build %s%s" % (NBYTES >> 20, args.reps, WARMUP, BUILD,
                        "".join(" %s=%s" % kv for kv in sorted(DED_ENV.items()))))
    results = {}
    for name in topologies:
        try:
            bench_topology(name, args, results, args.logs)
        except wanlab.LabError as e:
            ctx("topology %s: lab failed: %s" % (name, e))
            print("wan topology=%s error=lab" % name, flush=True)
    # The LP's own cost, on an idle machine now that the lab is down.
    if os.path.exists(LP_BENCH):
        r = subprocess.run([LP_BENCH], capture_output=True, text=True)
        sys.stdout.write(r.stdout)
    else:
        ctx("no %s: LP solve times not measured" % LP_BENCH)
    return 0


if __name__ == "__main__":
    sys.exit(main())
