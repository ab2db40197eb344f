"""tests/attacks/tlprocs.py - what the Python tests of tlserverd
(tests/attacks/http_attacks.py, the Python parts of tests/sh/) and
bench/soak.py share to start, watch and fault a server from outside: a
server started on a free loopback port and waited for, its child
processes read from /proc, and a small tmpfs of its own (a mount
namespace made with unshare) for its database, to fill and empty.
tests/sh/lib.sh is the shell tests' counterpart.  Standard library only;
Linux only.
"""
import os
import shutil
import socket
import subprocess
import sys
import time


def free_port():
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(server, folder, name, args=(), env=None, wrap=(), db=None):
    """Starts tlserverd `server` on a free port of 127.0.0.1 with its
    database `db` (default FOLDER/cache.db), its stderr in FOLDER/NAME.log
    and its port in FOLDER/NAME.port, after the command line prefix `wrap`
    (tmpfs_wrap) and with the environment `env` (default this one's).
    Waits until it has written its port (30 s at most).  Returns (the
    process, the port, the log opened for reading); when it does not start,
    stops it and exits with the log."""
    port_file = os.path.join(folder, name + ".port")
    log = open(os.path.join(folder, name + ".log"), "w+")
    proc = subprocess.Popen(list(wrap) + [server, "--listen", "127.0.0.1:0", "--port-file", port_file,
                                          "--db", db or os.path.join(folder, "cache.db")] + list(args),
                            stdin=subprocess.DEVNULL, stderr=log, env=env)
    for _ in range(1500):
        if os.path.exists(port_file) and open(port_file).read().strip() or proc.poll() is not None:
            break
        time.sleep(0.02)
    if not (os.path.exists(port_file) and open(port_file).read().strip()):
        stop(proc)
        log.seek(0)
        sys.exit("%s: the server %s did not start:\n%s" % (os.path.basename(sys.argv[0]), name, log.read()))
    return proc, int(open(port_file).read()), log


def http_get(port, path, src="127.0.0.1", timeout=5.0):
    """GET path of the server on 127.0.0.1:port from address src, with
    Connection: close: the answer's bytes, head and body (OSError when the
    connection fails)."""
    s = socket.socket()
    try:
        s.settimeout(timeout)
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                return out
            out += c
    finally:
        s.close()


def stop(proc, seconds=20):
    """Stops a process: SIGTERM, then SIGKILL after `seconds`; waits for it."""
    proc.terminate()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def children(ppid):
    """The live (not zombie) children of process ppid: a list of (pid,
    command name, argv as a list of bytes)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open("/proc/%s/stat" % d).read()
            argv = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        rp = stat.rindex(")")
        fields = stat[rp + 2:].split()
        if int(fields[1]) == ppid and fields[0] not in ("Z", "X"):
            out.append((int(d), stat[stat.index("(") + 1:rp], argv))
    return out


def workers(server_pid):
    """The compile workers of a tlserverd: its children run with --worker-fd."""
    return [pid for pid, _, argv in children(server_pid) if b"--worker-fd" in argv]


def tmpfs_unavailable():
    """None when this process can make a mount namespace with a tmpfs of
    its own (unshare -m), else why not."""
    unshare = shutil.which("unshare")
    if not unshare:
        return "unshare (util-linux) is missing"
    probe = subprocess.run([unshare, "-m", "-r", "true"] if os.geteuid() else
                           [unshare, "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        return ("cannot make a mount namespace here: %s"
                % probe.stderr.decode(errors="replace").strip())
    return None


def tmpfs_wrap(folder, size):
    """The command line prefix that runs a program in a mount namespace of
    its own where `folder` (which must exist) is a tmpfs of `size` ("8m"),
    private to that namespace.  Its pid is the program's (unshare and sh
    exec), so the folder's contents are reachable from outside as
    /proc/PID/root/FOLDER (tmpfs_path)."""
    flags = ["-m", "--propagation", "private"] + (["-r"] if os.geteuid() else [])
    return ([shutil.which("unshare")] + flags +
            ["sh", "-c", 'mount -t tmpfs -o size=%s tmpfs "$0" && exec "$@"' % size, folder])


def tmpfs_path(pid, folder, name):
    """Path, from outside, of the file `name` in the tmpfs `folder` of the
    namespace of process pid."""
    return "/proc/%d/root%s/%s" % (pid, folder, name)


def fill(path):
    """Writes zeros to path until the file system is full (ENOSPC).
    Returns the bytes written; an error other than a full disk on opening
    is raised."""
    n = 0
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
                n += 1 << 20
        except OSError:
            pass
    return n
