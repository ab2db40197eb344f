#!/bin/sh
# tests/sh/server_sd_notify.sh - tlserverd's sd_notify readiness protocol
# (deploy/tlserverd.service is Type=notify), against a socket of its own
# standing in for systemd's:
#
# 1. NOTIFY_SOCKET a path: READY=1 arrives once the server listens (a
#    /healthz sent right after it gets 200), with a STATUS line;
#    SIGTERM sends STOPPING=1 before the server exits 0.
# 2. NOTIFY_SOCKET "@NAME" (the abstract namespace, as systemd uses): READY=1.
# 3. NOTIFY_SOCKET a relative path: the server starts anyway and says on
#    stderr that it cannot tell systemd.
# 4. Without NOTIFY_SOCKET nothing is sent (the server starts as always).
#
# Exit status: 0 pass, 1 fail.

cd "$(dirname "$0")/../.." || exit 1
TL_BUILD=${TL_BUILD:-build}
[ -x "$TL_BUILD/bin/tlserverd" ] || { echo "server_sd_notify.sh: FAIL: $TL_BUILD/bin/tlserverd not built" >&2; exit 1; }

exec python3 - "$TL_BUILD/bin/tlserverd" <<'PYEOF'
import os, signal, socket, subprocess, sys, tempfile, time, urllib.request

SERVER = sys.argv[1]
fails = 0
tmp = tempfile.mkdtemp(prefix="tl-notify-")


def check(ok, what, detail=""):
    global fails
    print("%s: %s%s" % ("ok" if ok else "FAIL", what, (" (%s)" % detail) if detail and not ok else ""))
    if not ok:
        fails += 1


def start(notify, tag):
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    if notify is not None:
        env["NOTIFY_SOCKET"] = notify
    log = open(os.path.join(tmp, tag + ".log"), "w+")
    port_file = os.path.join(tmp, tag + ".port")
    p = subprocess.Popen([SERVER, "--listen", "127.0.0.1:0", "--port-file", port_file, "--db",
                          os.path.join(tmp, "cache.db"), "--workers", "1", "--log-format", "off"],
                         env=env, stderr=log)
    return p, log, port_file


def receive(sock, seconds):
    sock.settimeout(seconds)
    try:
        return sock.recv(4096).decode()
    except socket.timeout:
        return ""


def healthz(port_file):
    port = int(open(port_file).read())
    try:
        return urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=5).status
    except OSError:
        return 0


# 1. a path
path = os.path.join(tmp, "notify")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
p, log, port_file = start(path, "path")
msg = receive(sock, 60)
check(msg.startswith("READY=1\n") and "STATUS=listening on port" in msg, "READY=1 with a STATUS", repr(msg))
check(os.path.exists(port_file) and healthz(port_file) == 200, "the server answers /healthz when it says READY=1")
p.send_signal(signal.SIGTERM)
msg = receive(sock, 30)
check(msg.startswith("STOPPING=1\n"), "STOPPING=1 on SIGTERM", repr(msg))
check(p.wait(60) == 0, "a graceful stop, exit 0")
sock.close()

# 2. the abstract namespace
name = "tl-notify-test-%d" % os.getpid()
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind("\0" + name)
p, log, port_file = start("@" + name, "abstract")
msg = receive(sock, 60)
check(msg.startswith("READY=1\n"), "READY=1 on an abstract socket (@NAME)", repr(msg))
p.terminate()
check(receive(sock, 30).startswith("STOPPING=1"), "STOPPING=1 on an abstract socket")
p.wait(60)
sock.close()

# 3. a name it cannot use; 4. none
for notify, tag in (("relative/notify", "relative"), (None, "none")):
    p, log, port_file = start(notify, tag)
    for _ in range(1500):
        if os.path.exists(port_file) or p.poll() is not None:
            break
        time.sleep(0.02)
    check(os.path.exists(port_file) and healthz(port_file) == 200, "NOTIFY_SOCKET %s: the server starts" % notify)
    p.terminate()
    p.wait(60)
    log.seek(0)
    text = log.read()
    if notify:
        check("NOTIFY_SOCKET='relative/notify' is not an absolute path" in text, "and says it cannot tell systemd", text[-300:])
    else:
        check("NOTIFY_SOCKET" not in text, "and says nothing of it", text[-300:])

print("%s: %d failed" % ("PASS" if not fails else "FAIL", fails))
sys.exit(1 if fails else 0)
PYEOF
