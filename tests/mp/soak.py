#!/usr/bin/python3
"""The churn soak (issue 22): volunteers come and go, and the run goes on.

N keyed single-rank trainer jobs (examples/trainer, one data shard each) train
on one swarm on loopback, with libdedmpi.so preloaded. For a while, at random
times (a seeded RNG: the seed is printed and replays the same schedule), a
random job is SIGKILLed and a replacement starts in its place (a joiner: the
same shard, a new process and identity, which must load the run's state),
and another job is SIGSTOPped for a few seconds and then SIGCONTinued (a
laptop that slept). A job that finishes its steps is replaced too. At least
`min_live` jobs are left running (started, in the run, not stopped) by every
kill and stop. Then the survivors train to their ends and linger, so that a
late one can still fetch what it needs, and the soak reads every job's
output:

- kills, stops, joins (succeeded, failed), reloads, evictions;
- the longest call: the trainer's --log-comm puts each step's longest
  all-reduce call in its step line; a job's first step as a founder (the
  rendezvous) is left out; a call past the bound (by more than 250 ms, the
  library's work after it and the stop's edges as seen from here), the
  job's own stops during it taken off, is a problem;
- the library's "no result within the bound" lines (a call that hit the
  bound): a problem, unless the job was itself stopped during that call
  (counted apart: resumed, it reloads, as the issue asks of it) and
  "dropping ... protocol violation" lines (between honest jobs, there
  should be none);
- resets: a job started while the run is going that finds "no run in
  progress" or does not resume at the run's step, and any job whose logged
  step goes back; stale joins (reported, not failed): a joiner that
  resumes more than 10 steps below the run's step when it started;
- failed joins: a joiner that exits non-zero before it is in the run, or
  says it cannot load the run's state;
- agreement: every job that finishes holds the run's parameters: jobs that
  end at the same step have bit-identical parameter files, and each final
  checksum equals what the other jobs logged at that step. The one
  exception, counted apart: a job stopped in one of its last 2 steps while
  the swarm went on for good has no step left to reload at, and must say
  at its end that it ends out of step (a job that says so and holds the
  run's parameters is a problem too).

Each job runs `--steps` steps from the run's step when it starts (the first
jobs' ends are staggered, so that they do not all leave at once and end the
run). Used by tests/mp/mp_test.py (`churn_soak`, short) and bench/soak.py
(the issue's 3 minutes). Nothing here depends on either.
"""
import os
import random
import re
import signal
import subprocess
import tempfile
import time
import zlib

from ports import free_port

SWARM_KEY = "c3" * 32

# What the library says at MPI_Finalize when the job's parameters are its
# own (docs/architecture.md, "Falling out of step"), and how close to its
# end a job must have been stopped for that to be its fate, not a fault: a
# job reloads at the step after the one that fell out of step.
ENDED_ASTRAY = "this job ends out of step with the run"
END_STOP_STEPS = 2

STEP_RE = re.compile(r"^step (\d+) loss \S+ checksum (\S+) comm_ms \S+ call_ms (\S+)$")


class Config:
    """What a soak runs. Times in seconds."""

    def __init__(self, trainer, lib, preload_extra="", jobs=6, duration=60.0, bound_s=10.0,
                 steps=400, step_ms=20, seed=None, min_live=3, stop_s=(2.0, 6.0),
                 gap_s=(3.0, 8.0), linger_ms=None, env=None, trainer_args=("--buckets", "2"),
                 workdir=None, log=None):
        self.trainer, self.lib, self.preload_extra = trainer, lib, preload_extra
        self.jobs, self.duration, self.bound_s = jobs, duration, bound_s
        self.steps, self.step_ms = steps, step_ms
        self.seed = int(seed) if seed not in (None, "") else random.SystemRandom().randrange(1 << 32)
        self.min_live, self.stop_s, self.gap_s = min_live, stop_s, gap_s
        self.linger_ms = int(1000 * bound_s) if linger_ms is None else linger_ms
        self.env = dict(env or {})
        self.trainer_args = list(trainer_args)
        self.workdir = workdir or tempfile.mkdtemp(prefix="dedsoak-")
        self.log = log or (lambda text: print(text, flush=True))


class SoakJob:
    """One single-rank trainer job: its process, what it logged, what was done to it."""

    def __init__(self, soak, slot, gen, join, run_step, end_step):
        cfg = soak.cfg
        self.slot, self.gen = slot, gen
        self.name = "job%d.%d" % (slot, gen)
        self.founder = gen == 0
        self.port = free_port()
        self.join = join                  # the addresses it bootstraps through
        self.run_step = run_step          # the run's step when it started
        self.end_step = end_step
        self.live_at_start = len(soak.live())
        self.out_path = os.path.join(cfg.workdir, self.name + ".out")
        self.err_path = os.path.join(cfg.workdir, self.name + ".err")
        self.params = os.path.join(cfg.workdir, "params-%s.bin" % self.name)
        env = {"LD_PRELOAD": " ".join(filter(None, [cfg.preload_extra, cfg.lib])),
               "DEDMPI_RUN": soak.run_name, "DEDMPI_SWARM_KEY": SWARM_KEY,
               "DEDMPI_LISTEN": "127.0.0.1:%d" % self.port,
               "DEDMPI_MIN_PEERS": str(cfg.jobs), "DEDMPI_LOG": "info",
               "DEDMPI_ROUND_TIMEOUT": "%gs" % cfg.bound_s}
        if join:
            env["DEDMPI_JOIN"] = ",".join(join)
        env.update(cfg.env)
        cmd = ["mpirun", "-np", "1", "--oversubscribe", "--bind-to", "none"]
        for k, v in env.items():
            cmd += ["-x", "%s=%s" % (k, v)]
        cmd += [cfg.trainer] + cfg.trainer_args + [
            "--steps", str(end_step), "--log-every", "1", "--log-comm",
            "--step-ms", str(cfg.step_ms), "--linger-ms", str(cfg.linger_ms),
            "--shards", str(cfg.jobs), "--shard-base", str(slot), "--out", self.params]
        self.cmd = cmd
        penv = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                    OMPI_MCA_btl_vader_single_copy_mechanism="none",
                    ASAN_OPTIONS="detect_leaks=0")
        self.t_start = time.time()
        self.proc = subprocess.Popen(cmd, stdout=open(self.out_path, "w"),
                                     stderr=open(self.err_path, "w"), cwd=cfg.workdir,
                                     env=penv, start_new_session=True)
        self.rank_pid = None
        self.killed = False
        self.stops = []           # [t_stop, t_cont or None]
        self.rc = None
        self.t_end = None
        self.replaced = False
        # From its stdout, read as it grows.
        self._off, self._part = 0, ""
        self.steps = {}           # step -> checksum
        self.calls = []           # (step, comm_ms, time seen)
        self.order = []           # logged steps in order
        self.resumed = None
        self.final = None
        self.t_first_step = None
        self._fast = 0

    # ------------------------------------------------------------ output

    def poll(self):
        """Reads what the job printed since the last poll."""
        try:
            with open(self.out_path) as f:
                f.seek(self._off)
                data = f.read()
                self._off = f.tell()
        except OSError:
            return
        now = time.time()
        data = self._part + data
        lines = data.split("\n")
        self._part = lines.pop()
        for line in lines:
            m = STEP_RE.match(line)
            if m:
                s = int(m.group(1))
                self.steps[s] = m.group(2)
                self.order.append(s)
                self.calls.append((s, float(m.group(3)), now))
                if self.t_first_step is None:
                    self.t_first_step = now
                continue
            m = re.match(r"resumed at step (\d+)$", line)
            if m:
                self.resumed = int(m.group(1))
                continue
            m = re.match(r"final loss \S+ checksum (\S+)$", line)
            if m:
                self.final = m.group(1)

    @property
    def err(self):
        try:
            return open(self.err_path, errors="replace").read()
        except OSError:
            return ""

    @property
    def out(self):
        try:
            return open(self.out_path, errors="replace").read()
        except OSError:
            return ""

    def last_step(self):
        return self.order[-1] if self.order else 0

    def stopped_near_end(self):
        """Stopped in one of its last END_STOP_STEPS steps: a round the
        swarm went on without may leave it no step to reload at."""
        end = self.last_step()
        return any(st[3] >= end - END_STOP_STEPS for st in self.stops)

    # ------------------------------------------------------------ state

    def alive(self):
        return self.rc is None and self.proc.poll() is None

    def stopped(self):
        return bool(self.stops) and self.stops[-1][1] is None

    def running(self):
        """Started, in the run (a step logged), not stopped, not finished:
        a donor a joiner can reach."""
        return self.alive() and not self.stopped() and bool(self.order) and self.final is None

    def find_rank(self):
        """The rank process (Open MPI gives it a process group of its own,
        so signals to mpirun's group do not reach it)."""
        if self.rank_pid is None:
            out = subprocess.run(["pgrep", "-P", str(self.proc.pid), "-f", "--",
                                  "--shard-base %d --out" % self.slot],
                                 capture_output=True, text=True).stdout.split()
            self.rank_pid = int(out[0]) if out else None
        return self.rank_pid

    def signal(self, sig):
        pid = self.find_rank()
        if pid is None:
            return False
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True

    def reap(self):
        """Records the exit once the process is gone."""
        if self.rc is None and self.proc.poll() is not None:
            self.rc = self.proc.returncode
            self.t_end = time.time()
            self.poll()

    def kill_all(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.rank_pid:
            try:
                os.kill(self.rank_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.reap()

    def describe(self, tail=40):
        lines = self.err.splitlines()
        return "%s (rc=%s, shard %d, started at the run's step %d, steps to %d)\n  cmd: %s\n" \
               "  stdout (last lines):\n%s\n  stderr (last %d lines):\n%s" % (
                   self.name, self.rc, self.slot, self.run_step, self.end_step,
                   " ".join(self.cmd), indent("\n".join(self.out.splitlines()[-8:])), tail,
                   indent("\n".join(lines[-tail:])))

    def around(self, pattern, ctx=4, most=2):
        """Its stderr lines around the first |most| matches of |pattern|."""
        lines = self.err.splitlines()
        hits = [i for i, l in enumerate(lines) if re.search(pattern, l)][:most]
        return "\n".join("  %s:\n%s" % (self.name, indent("\n".join(lines[max(0, i - ctx):i + ctx + 1])))
                         for i in hits)

    def logged_between(self, t0, t1):
        """Whether it logged a line with its time from |t0| to |t1|."""
        return any(t0 <= unwall(m, t1) <= t1
                   for m in re.findall(r"^(\d\d:\d\d:\d\d\.\d\d\d) ", self.err, re.M))

    def between(self, t0, t1, most=40):
        """Its stderr lines logged from |t0| to |t1| (time.time()s; a line
        without a time of its own, the shim's, goes with the one before),
        the last |most| of them."""
        keep, t = [], None
        for l in self.err.splitlines():
            m = re.match(r"^(\d\d:\d\d:\d\d\.\d\d\d) ", l)
            if m:
                t = unwall(m.group(1), t1)
            if t is not None and t0 <= t <= t1:
                keep.append(l)
        return "  %s, %s to %s:\n%s" % (self.name, wall(t0), wall(t1),
                                         indent("\n".join(keep[-most:])))


def wall(t):
    """|t| as the library's log lines write the time."""
    return "%s.%03d" % (time.strftime("%H:%M:%S", time.localtime(t)), int(t * 1000) % 1000)


def unwall(text, near):
    """The time a library log line's "HH:MM:SS.mmm" |text| stands for: the
    one within 12 hours of |near| (a time.time())."""
    h, m, s = text.split(":")
    lt = time.localtime(near)
    base = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, lt.tm_isdst))
    t = base + int(h) * 3600 + int(m) * 60 + float(s)
    while t > near + 43200:
        t -= 86400
    while t < near - 43200:
        t += 86400
    return t


def stopped_within(stops, begun, end):
    """Seconds of [begun, end] during which the job was stopped."""
    return sum(max(0.0, min(st[1] or end, end) - max(st[0], begun)) for st in stops)


# A call's time is the trainer's, a stop's edges are when the signals
# were sent: a call that ends at its bound shows a few ms past it, the
# library's own work after the bound and the stop's edges as seen from
# outside (past the bound means past it by more than this).
PAST_SLACK_MS = 250.0


def indent(text):
    return "\n".join("    " + l for l in text.splitlines())


class Soak:
    def __init__(self, cfg):
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.run_name = "soak-%d" % free_port()
        self.jobs = []            # every job ever started
        self.slot = [None] * cfg.jobs
        self.gen = [0] * cfg.jobs
        self.pending = []         # (time, slot): replacements to start
        self.events = []          # (time since start, what)
        self.kills = self.stops = self.skipped = 0
        self.run_max = 0          # the highest step any job logged
        self.t_progress = None    # when run_max last grew
        self.longest_stall = 0.0  # the longest time without a new step of the run
        self.stall_at = (0.0, 0)  # when it began, at which step
        self.t0 = None
        self.aborted = None
        self.t_churn = (0.0, 0.0)
        self.t_done = 0.0
        self.t_fast = None        # when a job last logged a call well within the bound

    def note(self, what):
        now = time.time()
        self.events.append((now - self.t0, now, what))

    def live(self):
        return [j for j in self.slot if j is not None and j.running()]

    def start(self, slot, founder=False):
        cfg = self.cfg
        gen = self.gen[slot]
        self.gen[slot] += 1
        if founder:
            first = self.slot[0]
            join = [] if slot == 0 else ["127.0.0.1:%d" % first.port]
            # Staggered ends, so that the first jobs do not all leave at once.
            end = cfg.steps + slot * cfg.steps // cfg.jobs
            run_step = 0
        else:
            # Through the jobs in the run; if none is (all stopped or
            # joining), through those alive.
            donors = self.live() or [j for j in self.slot if j is not None and j.alive()] or \
                [j for j in self.slot if j is not None]
            join = ["127.0.0.1:%d" % j.port for j in donors]
            run_step = max([j.last_step() for j in self.live()] + [0])
            end = run_step + cfg.steps
        j = SoakJob(self, slot, gen, join, run_step, end)
        self.slot[slot] = j
        self.jobs.append(j)
        if not founder:
            self.note("%s starts (a joiner: run at step %d, %d jobs running)" %
                      (j.name, run_step, j.live_at_start))
        return j

    def poll(self):
        now = time.time()
        for j in self.jobs:
            if j.rc is None:
                j.poll()
                j.reap()
        for j in self.jobs:
            while j.calls and j._fast < len(j.calls):
                if j.calls[j._fast][1] < 500.0 * self.cfg.bound_s:
                    self.t_fast = max(self.t_fast or 0.0, j.calls[j._fast][2])
                j._fast += 1
        steps = [j.last_step() for j in self.jobs if j.order]
        top = max(steps + [0])
        if top > self.run_max:
            if self.t_progress is not None and self.run_max > 0:
                if now - self.t_progress > self.longest_stall:
                    self.longest_stall = now - self.t_progress
                    self.stall_at = (self.t_progress, self.run_max)
            self.run_max, self.t_progress = top, now
        # Resume the stopped whose time is up.
        for j in self.jobs:
            if j.stopped() and now >= j.stops[-1][2]:
                j.signal(signal.SIGCONT)
                j.stops[-1][1] = now
                self.note("%s continued after %.1f s" % (j.name, now - j.stops[-1][0]))

    def replace_gone(self, churning):
        """A job in a slot that finished or died (not by us) gets a
        replacement while the churn lasts."""
        now = time.time()
        for slot, j in enumerate(self.slot):
            if j is None or j.replaced or not churning:
                continue
            if j.final is not None or (j.rc is not None and not j.killed):
                j.replaced = True
                why = "finished" if j.final is not None else "exited with %s" % j.rc
                self.note("%s %s" % (j.name, why))
                self.pending.append((now + self.rng.uniform(0.0, 1.0), slot))
        for item in list(self.pending):
            if item[0] <= now:
                self.pending.remove(item)
                self.start(item[1])

    def churn(self):
        """One event: a random running job is killed (a replacement starts
        within 2 s), another is stopped for stop_s seconds; each only if
        min_live jobs are left running."""
        cfg, rng = self.cfg, self.rng
        live = self.live()
        acts = ["kill", "stop"]
        rng.shuffle(acts)
        for act in acts:
            live = [j for j in live if j.running()]
            if len(live) - 1 < cfg.min_live:
                self.skipped += 1
                self.note("no %s: %d jobs running" % (act, len(live)))
                continue
            j = rng.choice(live)
            if act == "kill":
                if not j.signal(signal.SIGKILL):
                    continue
                j.killed = True
                j.replaced = True
                self.kills += 1
                self.note("%s killed at step %d" % (j.name, j.last_step()))
                self.pending.append((time.time() + rng.uniform(0.5, 2.0), j.slot))
            else:
                secs = rng.uniform(*cfg.stop_s)
                if not j.signal(signal.SIGSTOP):
                    continue
                now = time.time()
                j.stops.append([now, None, now + secs, j.last_step()])
                self.stops += 1
                self.note("%s stopped for %.1f s at step %d" % (j.name, secs, j.last_step()))
            live.remove(j)

    def run(self):
        cfg = self.cfg
        cfg.log("soak: seed %d, %d jobs, %.0f s of churn, bound %gs, %d steps a job, in %s" %
                (cfg.seed, cfg.jobs, cfg.duration, cfg.bound_s, cfg.steps, cfg.workdir))
        try:
            return self._run()
        finally:
            for j in self.jobs:
                if j.stopped():
                    j.signal(signal.SIGCONT)
                if j.rc is None:
                    j.kill_all()

    def _run(self):
        cfg = self.cfg
        self.t0 = time.time()
        for s in range(cfg.jobs):
            self.start(s, founder=True)
        # The run gets going: every first job at step 5.
        deadline = time.time() + 120 + 4 * cfg.bound_s
        while time.time() < deadline:
            self.poll()
            if all(j.last_step() >= 5 for j in self.slot) or any(j.rc is not None for j in self.slot):
                break
            time.sleep(0.1)
        if not all(j.last_step() >= 5 for j in self.slot):
            self.aborted = "the run did not get going:\n" + "\n".join(j.describe() for j in self.slot)
            return self.result()
        t_start = time.time()
        self.t_churn = (t_start - self.t0, None)
        t_stop = t_start + cfg.duration
        t_next = t_start + self.rng.uniform(*cfg.gap_s) / 2
        while time.time() < t_stop:
            self.poll()
            if self.livelocked():
                break
            self.replace_gone(True)
            if time.time() >= t_next:
                self.churn()
                t_next = time.time() + self.rng.uniform(*cfg.gap_s)
            time.sleep(0.1)
        self.t_churn = (self.t_churn[0], time.time() - self.t0)
        self.note("churn over: the survivors train to their ends")
        # The end: no more churn; the replacements already due start, the
        # stopped are resumed on time, and everyone finishes, at the pace of
        # the churn (twice the time it would take, and two bounds more).
        pace = max(self.run_max, 1) / max(time.time() - self.t0, 1.0)
        left = max([j.end_step - j.last_step() for j in self.jobs if j.rc is None] + [0])
        end_s = 2.0 * (left + cfg.steps) / pace + 2 * cfg.bound_s + cfg.linger_ms / 1000.0 + 30
        hard = time.time() + end_s
        while not self.aborted:
            if self.livelocked():
                break
            self.poll()
            for item in list(self.pending):
                if item[0] <= time.time():
                    self.pending.remove(item)
                    self.start(item[1])
            if not self.pending and all(j.rc is not None for j in self.jobs):
                break
            if time.time() > hard:
                self.aborted = "the jobs did not end within %.0f s of the churn's end (%d steps " \
                    "left at %.1f steps/s)" % (end_s, left, pace)
                break
            time.sleep(0.1)
        self.t_done = time.time() - self.t0
        return self.result()

    def livelocked(self):
        """True (and the soak aborted) once no job has made a call well
        within the bound (half of it) for three bounds while one still
        trains: the issue's livelock, every call at the bound."""
        training = [j for j in self.jobs if j.alive() and j.final is None and not j.stopped()]
        since = time.time() - (self.t_fast or time.time())
        if training and since > 3 * self.cfg.bound_s + 10:
            self.aborted = "livelock: no call within half the bound for %.0f s (jobs still " \
                "training: %s)" % (since, " ".join("%s at step %d" % (j.name, j.last_step())
                                                    for j in training))
            self.note(self.aborted)
            return True
        return False

    # ------------------------------------------------------------ the reading

    def result(self):
        for j in self.jobs:
            j.poll()
        return Result(self)


class Result:
    """The counts and the problems found, from the jobs' output."""

    def __init__(self, soak):
        self.soak = soak
        cfg = soak.cfg
        jobs = soak.jobs
        self.seed = cfg.seed
        self.cfg = cfg
        self.problems = []   # (check, text)
        if soak.aborted:
            self.problems.append(("the soak", soak.aborted))
        self.kills, self.stops, self.skipped = soak.kills, soak.stops, soak.skipped
        joiners = [j for j in jobs if not j.founder]
        self.joins = len(joiners)
        self.joins_ok = self.joins_failed = 0
        self.failed_joins = []
        for j in joiners:
            why = None
            err = j.err
            cannot = re.search(r"cannot load the state of run[^\n]*|no peer offered the run's "
                               r"state within[^\n]*", err)
            if cannot:
                why = cannot.group(0)
            elif not j.order and j.rc not in (None, 0) and not j.killed:
                why = "exited with %s before its first step" % j.rc
            elif not j.order and j.rc is not None and not j.killed:
                why = "ended without a step"
            if why:
                self.joins_failed += 1
                self.failed_joins.append(j)
                self.problems.append((
                    "failed join", "%s (%d jobs running when it started, bootstrapping through "
                    "%s): %s\n%s" % (j.name, j.live_at_start, ",".join(j.join), why,
                                     j.around(r"cannot load|no peer offered|error:") or
                                     j.describe())))
            elif j.order:
                self.joins_ok += 1
        # A job in the run that ended badly by itself.
        for j in jobs:
            if j.order and j.rc not in (None, 0) and not j.killed:
                self.problems.append(("job failed", "%s exited with %s at step %d\n%s" %
                                      (j.name, j.rc, j.last_step(), j.describe())))
        # Calls: the longest; a founder's first step waits for the rendezvous.
        # A call's bound counts the time its job ran (the library moves it
        # by the time its process was stopped), as the simulator's
        # termination check does: the job's own stops during the call are
        # taken off before it is held against the bound.
        self.longest = (0.0, None, None, False)
        bound_ms = 1000.0 * cfg.bound_s
        for j in jobs:
            for k, (s, ms, seen) in enumerate(j.calls):
                if j.founder and k == 0:
                    continue
                begun = seen - ms / 1000.0
                own_ms = 1000.0 * stopped_within(j.stops, begun, seen)
                if ms > self.longest[0]:
                    stopped = any(st[0] <= seen and (st[1] or seen) >= begun - 0.3
                                  for st in j.stops)
                    self.longest = (ms, j.name, s, stopped)
                if ms - own_ms >= bound_ms + PAST_SLACK_MS:
                    self.problems.append(("call past the bound", "%s step %d: %.0f ms, %.0f of "
                                          "them stopped (the bound is %.0f ms)\n%s" %
                                          (j.name, s, ms, own_ms, bound_ms,
                                           j.between(begun - 0.5, seen + 0.2))))
        # The library's own word. A round at its bound in a call during
        # which the job itself was stopped is the stopped job's: the issue
        # asks that it catch up or reload once resumed (it reloads), and
        # that the others keep their step time (the longest time without
        # a step of the run, and their own calls, say whether they did).
        # Counted apart; the others' are problems.
        self.bound_hits = self.bound_hits_stopped = 0
        self.violations = 0
        self.reloads = self.evictions = self.out_of_step = 0
        for j in jobs:
            err = j.err
            hits = re.findall(r"^(\d\d:\d\d:\d\d\.\d\d\d) [^\n]*no result within the bound", err,
                              re.M)
            # A line without its time (none is written so) cannot be told
            # apart: a problem.
            n = len(re.findall(r"no result within the bound", err)) - len(hits)
            windows = []
            for h in hits:
                end = unwall(h, j.t_start)
                begun = end - cfg.bound_s
                for _ in range(3):  # the bound moved by the job's stops
                    begun = end - cfg.bound_s - stopped_within(j.stops, begun, end)
                if stopped_within(j.stops, begun, end) > 0:
                    self.bound_hits_stopped += 1
                else:
                    n += 1
                    windows.append((begun, end))
            if n:
                self.bound_hits += n
                # What every job logged during the first such call: where
                # the round's time went is read across the swarm (the
                # library's line says what it could still count on).
                shown = j.around(r"no result within the bound")
                if windows:
                    b, e = windows[0]
                    shown = "\n".join([j.between(b - 0.5, e + 0.2, most=60)] +
                                      [o.between(b - 0.5, e + 0.2, most=25) for o in jobs
                                       if o is not j and o.logged_between(b - 0.5, e + 0.2)])
                self.problems.append(("call at the bound", "%s: %d rounds with no result within "
                                      "the bound\n%s" % (j.name, n, shown)))
            v = len(re.findall(r"dropping (peer|connection)[^\n]*protocol violation", err))
            if v:
                self.violations += v
                self.problems.append(("protocol violation", "%s dropped %d peers for a protocol "
                                      "violation\n%s" % (j.name, v, j.around(r"protocol violation"))))
            self.reloads += len(re.findall(r"back in step at round", err))
            self.evictions += len(re.findall(r"peer \w+ evicted", err))
            self.out_of_step += len(re.findall(r"out of step", err))
        # Resets.
        self.resets = 0
        self.stale = []
        for j in jobs:
            err = j.err
            why = []
            if not j.founder and "no run in progress" in err:
                why.append("found no run in progress while the run was at step %d" % j.run_step)
            if not j.founder and j.order:
                if j.resumed is None:
                    why.append("did not resume at the run's step %d: it started at step %d" %
                               (j.run_step, j.order[0]))
                elif j.resumed < j.run_step - 10:
                    self.stale.append("%s resumed at step %d, the run was at %d when it started" %
                                      (j.name, j.resumed, j.run_step))
            back = [(a, b) for a, b in zip(j.order, j.order[1:]) if b < a - 10]
            if back:
                why.append("its logged step went back: %s" %
                           ", ".join("%d -> %d" % ab for ab in back[:5]))
            if why:
                self.resets += 1
                self.problems.append(("reset", "%s: %s\n%s" % (j.name, "; ".join(why),
                                                               j.around(r"no run in progress|"
                                                                        r"joining run|back in step"))))
        # Agreement: jobs that finished, against each other and the run's log.
        finished = [j for j in jobs if j.final is not None and j.rc == 0]
        self.finished = len(finished)
        self.compared = self.ended_astray = 0
        by_end = {}
        for j in finished:
            by_end.setdefault(j.order[-1] if j.order else -1, []).append(j)
        for end, group in sorted(by_end.items()):
            blobs = {}
            for j in group:
                try:
                    blobs[j] = open(j.params, "rb").read()
                except OSError:
                    blobs[j] = b""
                if not blobs[j] or "0x%08x" % (zlib.crc32(blobs[j]) & 0xffffffff) != j.final:
                    self.problems.append(("finished bit-identical", "%s: its parameter file does "
                                          "not hold its final checksum %s" % (j.name, j.final)))
            # A job stopped at its end that says it ends out of step holds
            # its own parameters; the others must agree.
            said = {j: ENDED_ASTRAY in j.err for j in group}
            excused = [j for j in group if said[j] and j.stopped_near_end()]
            kept = [j for j in group if j not in excused]
            if len(set(blobs[j] for j in kept)) > 1:
                self.problems.append(("finished bit-identical", "jobs ending at step %d differ: %s" %
                                      (end, ", ".join("%s %s" % (j.name, j.final) for j in kept))))
            # What the other jobs logged at that step (the majority: a job out
            # of step may log its own values for a while).
            seen = [o.steps[end] for o in jobs if o not in group and end in o.steps]
            major = max(set(seen), key=seen.count) if seen else None
            if seen:
                self.compared += len(group)
            for j in group:
                ref = major if seen else next((k.final for k in kept if k is not j), None)
                if said[j] and j.final == ref:
                    self.problems.append((
                        "finished bit-identical", "%s says it ends out of step, but its checksum "
                        "%s at step %d is the run's\n%s" % (j.name, j.final, end,
                                                            j.around(ENDED_ASTRAY))))
                elif j in excused:
                    self.ended_astray += 1
                elif said[j] or (seen and j.final != major):
                    self.problems.append((
                        "finished bit-identical", "%s ended at step %d with checksum %s; the "
                        "run's at that step is %s%s\n%s" %
                        (j.name, end, j.final,
                         "%s (%d of %d jobs that logged it)" % (major, seen.count(major),
                                                                 len(seen)) if seen else "unknown",
                         "; it says it ends out of step, but was not stopped in its last %d "
                         "steps" % END_STOP_STEPS if said[j] else "",
                         j.around(ENDED_ASTRAY if said[j] else r"out of step|cannot reload"))))
        # Steps logged with other parameters than the run's (the majority):
        # a job out of step, until it reloads.
        self.diverged = 0
        tally = {}
        for j in jobs:
            for s, c in j.steps.items():
                tally.setdefault(s, []).append(c)
        for j in jobs:
            for s, c in j.steps.items():
                cs = tally[s]
                major = max(set(cs), key=cs.count)
                if len(cs) > 1 and cs.count(major) > len(cs) // 2 and c != major:
                    self.diverged += 1
        self.longest_stall = soak.longest_stall
        self.stall_at = soak.stall_at
        self.run_max = soak.run_max
        self.events = soak.events
        self.t_churn = soak.t_churn
        self.t_done = soak.t_done

    def table(self):
        ms, who, step, stopped = self.longest
        rows = [
            ("seed", "%d" % self.seed),
            ("jobs, bound, steps a job", "%d, %gs, %d" % (self.cfg.jobs, self.cfg.bound_s,
                                                         self.cfg.steps)),
            ("churn", "%.0f s (from %.0f s to %.0f s; all ended at %.0f s)" %
             ((self.t_churn[1] or 0) - self.t_churn[0], self.t_churn[0], self.t_churn[1] or 0,
              self.t_done)),
            ("kills", "%d" % self.kills),
            ("stops", "%d" % self.stops),
            ("churn skipped (too few running)", "%d" % self.skipped),
            ("joins", "%d (%d in the run, %d failed)" % (self.joins, self.joins_ok,
                                                        self.joins_failed)),
            ("longest call", "%.0f ms (%s step %s%s)" % (ms, who, step,
                                                         ", stopped during it" if stopped else "")),
            ("calls at the bound", "%d (and %d by jobs stopped during the call)" % (
                self.bound_hits, self.bound_hits_stopped)),
            ("resets", "%d" % self.resets),
            ("stale joins (resumed > 10 steps behind)", "%d" % len(self.stale)),
            ("failed joins", "%d" % self.joins_failed),
            ("protocol-violation drops", "%d" % self.violations),
            ("reloads (back in step)", "%d" % self.reloads),
            ("evictions", "%d" % self.evictions),
            ("steps logged off the run's parameters", "%d" % self.diverged),
            ("longest time without a step of the run", "%.1f s (from %s, step %d)" % (
                self.longest_stall, wall(self.stall_at[0]), self.stall_at[1])),
            ("run's last step", "%d" % self.run_max),
            ("jobs finished, compared to the run", "%d, %d" % (self.finished, self.compared)),
            ("ended out of step (stopped at the end)", "%d" % self.ended_astray),
        ]
        w = max(len(k) for k, _ in rows)
        return "\n".join("  %-*s  %s" % (w, k, v) for k, v in rows)

    def report(self):
        """The problems, each with its check and the log lines behind it,
        then what is worth knowing but not a failure."""
        return "\n".join(["[%s] %s" % p for p in self.problems] +
                         ["[note] %s" % n for n in self.stale])

    def timeline(self):
        """What the soak did, when: seconds from the start, and the wall
        time as the library's log lines show it."""
        return "\n".join("  %6.1f s  %s  %s" % (t, wall(w), what) for t, w, what in self.events)


def run(cfg):
    """Runs a soak; returns its Result."""
    return Soak(cfg).run()
