"""Interrupts a rank that waits in a collective for a rank that never comes.

usage: stuck_collective.py SIGNALS JSONL COMMAND...
Starts COMMAND (mpiexec of two `kiln train` ranks whose command lines name
JSONL), waits until JSONL has a step, stops rank 0 (SIGSTOP: it never reaches
its next collective), then sends rank 1 SIGTERM: with SIGNALS=2 twice, a
second apart, printing whether rank 1 was still running after the first (it
waits in a collective and cannot finish its step) and whether it ended within
10 s of the second; with SIGNALS=1 once, printing whether it ended within 30
s (the watchdog's grace is 10). Then ends the job and prints the launcher's
output. Exits 1 if rank 1 did not end.
"""
import os
import signal
import subprocess
import sys
import time

signals, jsonl, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def ranks():
    """The job's kiln processes by PMI_RANK."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError:
            continue
        if args[0].endswith(b"kiln") and any(jsonl.encode() in a for a in args) and b"PMI_RANK" in env:
            found[int(env[b"PMI_RANK"])] = int(pid)
    return found


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


ok = wait_for(lambda: os.path.exists(jsonl) and '"step"' in open(jsonl).read(), 60)
pids = ranks()
if not ok or sorted(pids) != [0, 1]:
    job.kill()
    print(f"the job did not start two ranks that train (ranks {pids})")
    print(job.communicate()[0])
    sys.exit(1)
os.kill(pids[0], signal.SIGSTOP)
time.sleep(0.5)
os.kill(pids[1], signal.SIGTERM)
if signals == 2:
    time.sleep(1)
    print(f"rank 1 after one SIGTERM: {'running' if running(pids[1]) else 'ended'}")
    os.kill(pids[1], signal.SIGTERM)
    ended = wait_for(lambda: not running(pids[1]), 10)
    print(f"rank 1 after a second SIGTERM: {'ended' if ended else 'running'}")
else:
    ended = wait_for(lambda: not running(pids[1]), 30)
    print(f"rank 1 within 30 s of one SIGTERM: {'ended' if ended else 'running'}")
if running(pids[0]):  # the launcher ends it once rank 1 is gone
    os.kill(pids[0], signal.SIGKILL)
try:
    output = job.communicate(timeout=30)[0]
except subprocess.TimeoutExpired:
    job.kill()
    output = job.communicate()[0]
    for pid in pids.values():
        if running(pid):
            os.kill(pid, signal.SIGKILL)
print(output)
sys.exit(0 if ended else 1)
