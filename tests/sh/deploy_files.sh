#!/bin/sh
# tests/sh/deploy_files.sh - checks the deployment files of deploy/ as far as
# this machine allows (README "Deployment" says what each check covers):
#
# 1. deploy/tlserverd.service and deploy/tlserverd@.service (as the
#    instance tlserverd@8471): `systemd-analyze verify` prints nothing (no
#    unknown key, a real ExecStart binary: build/bin/tlserverd put in its
#    place) and `systemd-analyze security --offline=true` rates the
#    exposure at most 3.0; both are Type=notify with DynamicUser,
#    StateDirectory and ProtectSystem=strict.
# 2. MemoryDenyWriteExecute=yes does not break the toolchains: tlc compiles
#    examples/tilus_add_one.json for sm_80 (NVRTC) and gfx942 (clang) under
#    prctl(PR_SET_MDWE), the kernel's own form of that rule (a W+X mmap is
#    refused there, to show it is on).
# 3. deploy/k8s: `kubectl kustomize` renders it (where kubectl is
#    installed); PyYAML then checks the objects: the tlserverd Deployment's
#    readiness probe is GET /readyz and its liveness probe GET /healthz on
#    its container's port, every container has requests and limits and runs
#    non-root with a read-only root, no privilege escalation and no
#    capabilities, each Service selects its Deployment's pods on a port the
#    pods have, the --tier URL names the Redis Service, and every flag given
#    to tlserverd is one `tlserverd --help` lists.
# 4. deploy/Dockerfile: several stages, a numeric non-root USER, the runtime
#    stage installs the Debian package of every library build/bin/tlserverd
#    needs (objdump -p NEEDED, resolved by ldd, owned per dpkg -S), and its
#    EXPOSE, VOLUME and --db agree.
# 5. Redis's password reaches tlserverd as a file, never an argument or an
#    environment variable: tlserverd@.service's LoadCredential= and
#    --tier-auth-file %d/..., the k8s Secrets (Redis's redis.conf,
#    tlserverd's copy by the init container), the Dockerfile's example.
#    Each one's own command line is run against a redis-server with
#    requirepass (the tier must be up) and the password looked for in the
#    processes' /proc/PID/cmdline and environ.
#
# Exit status: 0 pass, 1 fail, 77 when a part could not run here (no
# systemd-analyze, no PR_SET_MDWE, no NVRTC or clang, no kubectl, no
# PyYAML, no redis-server): the last line on stderr names them.

cd "$(dirname "$0")/../.." || exit 1
TL_BUILD=${TL_BUILD:-build}
[ -x "$TL_BUILD/bin/tlserverd" ] || { echo "deploy_files.sh: FAIL: $TL_BUILD/bin/tlserverd not built" >&2; exit 1; }

exec python3 - "$TL_BUILD" <<'PYEOF'
import ctypes, json, os, re, shutil, subprocess, sys, tempfile

B = os.path.abspath(sys.argv[1])
fails, skips = 0, []


def check(ok, what, detail=""):
    global fails
    print("%s: %s%s" % ("ok" if ok else "FAIL", what, (" (%s)" % detail) if detail and not ok else ""))
    if not ok:
        fails += 1


def skip(what, why):
    print("skipped: %s: %s" % (what, why))
    skips.append("%s (%s)" % (what, why))


tmp = tempfile.mkdtemp(prefix="tl-deploy-")

# ---- 1. systemd units ----
if not shutil.which("systemd-analyze"):
    skip("systemd units", "no systemd-analyze")
else:
    for src, name in (("deploy/tlserverd.service", "tlserverd.service"),
                      ("deploy/tlserverd@.service", "tlserverd@8471.service")):
        text = open(src).read()
        for key in ("Type=notify", "DynamicUser=yes", "StateDirectory=", "ProtectSystem=strict",
                    "NoNewPrivileges=yes", "MemoryDenyWriteExecute=yes"):
            check(("\n" + key) in text, "%s sets %s" % (src, key))
        unit = os.path.join(tmp, name)
        open(unit, "w").write(text.replace("/usr/local/bin/tlserverd", os.path.join(B, "bin", "tlserverd")))
        v = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
        check(v.returncode == 0 and not (v.stdout + v.stderr).strip(), "systemd-analyze verify %s: no complaint" % src,
              (v.stdout + v.stderr).strip()[:500])
        s = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", unit],
                           capture_output=True, text=True)
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", s.stdout)
        level = float(m.group(1)) if m else 99.0
        check(m is not None and level <= 3.0, "systemd-analyze security %s: exposure %s, at most 3.0"
              % (src, m.group(1) if m else "?"), s.stdout[-300:] + s.stderr[-300:])

# ---- 2. the toolchains under MemoryDenyWriteExecute ----
libc = ctypes.CDLL(None, use_errno=True)
probe = subprocess.run([sys.executable, "-c",
                        "import ctypes,mmap,sys; l=ctypes.CDLL(None)\n"
                        "if l.prctl(65,1,0,0,0)!=0: sys.exit(3)\n"
                        "try: mmap.mmap(-1,4096,prot=7)\n"
                        "except PermissionError: sys.exit(0)\n"
                        "sys.exit(4)"])
if probe.returncode == 3:
    skip("MemoryDenyWriteExecute", "prctl(PR_SET_MDWE) is refused here (a kernel before 6.3?)")
else:
    check(probe.returncode == 0, "PR_SET_MDWE refuses a writable and executable mapping")
    targets = subprocess.run([os.path.join(B, "bin", "tlc"), "targets"], capture_output=True, text=True).stdout.split()
    for t in ("sm_80", "gfx942"):
        if t not in targets:
            skip("MemoryDenyWriteExecute with %s" % t, "the toolchain for %s is not installed" % t)
            continue
        out = os.path.join(tmp, "add_one." + t)
        r = subprocess.run([sys.executable, "-c",
                            "import ctypes,os,sys; ctypes.CDLL(None).prctl(65,1,0,0,0); os.execv(sys.argv[1], sys.argv[1:])",
                            os.path.join(B, "bin", "tlc"), "compile", "examples/tilus_add_one.json", "--target", t,
                            "-o", out], capture_output=True, text=True)
        check(r.returncode == 0 and os.path.getsize(out) > 0,
              "tlc compiles for %s with writable executable memory refused" % t, r.stderr[-400:])

# ---- 3. Kubernetes ----
try:
    import yaml
except ImportError:
    yaml = None
    skip("deploy/k8s", "no PyYAML (python3-yaml)")
if yaml:
    if shutil.which("kubectl"):
        k = subprocess.run(["kubectl", "kustomize", "deploy/k8s"], capture_output=True, text=True, timeout=120)
        check(k.returncode == 0, "kubectl kustomize deploy/k8s renders", k.stderr[-400:])
        docs = [d for d in yaml.safe_load_all(k.stdout) if d]
    else:
        skip("kubectl kustomize", "no kubectl")
        docs = [d for f in ("redis.yaml", "tlserverd.yaml")
                for d in yaml.safe_load_all(open(os.path.join("deploy/k8s", f))) if d]
    deps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Deployment"}
    svcs = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service"}
    check(set(deps) == {"tlserverd", "tlserverd-redis"}, "Deployments of tlserverd and Redis", sorted(deps))
    check(set(svcs) == {"tlserverd", "tlserverd-redis"}, "Services of tlserverd and Redis", sorted(svcs))
    helptext = subprocess.run([os.path.join(B, "bin", "tlserverd"), "--help"], capture_output=True, text=True).stdout
    known = set(re.findall(r"^\s+(--[a-z0-9-]+)", helptext, re.M))
    for name, d in deps.items():
        spec = d["spec"]["template"]["spec"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        check(all(labels.get(k) == v for k, v in d["spec"]["selector"]["matchLabels"].items()),
              "%s: its selector matches its pods" % name)
        psc = spec.get("securityContext", {})
        for c in spec.get("initContainers", []) + spec["containers"]:
            where = "%s/%s" % (name, c["name"])
            res = c.get("resources", {})
            check(all(k in res.get(s_, {}) for s_ in ("requests", "limits") for k in ("cpu", "memory")),
                  "%s: cpu and memory requests and limits" % where)
            sc = c.get("securityContext", {})
            check(psc.get("runAsNonRoot") is True and isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0,
                  "%s: runs as a non-root user" % where)
            check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
                  and sc.get("capabilities", {}).get("drop") == ["ALL"],
                  "%s: read-only root, no privilege escalation, no capabilities" % where)
        for svc in svcs.values():
            if svc["spec"]["selector"] == {k: labels[k] for k in svc["spec"]["selector"] if k in labels} and \
                    svc["metadata"]["name"] == name:
                ports = {p["name"] for c in spec["containers"] for p in c.get("ports", [])}
                check(all(p["targetPort"] in ports for p in svc["spec"]["ports"]),
                      "Service %s targets ports its pods have" % name)
    c = deps["tlserverd"]["spec"]["template"]["spec"]["containers"][0]
    port = {p["name"]: p["containerPort"] for p in c["ports"]}
    rp, lp = c.get("readinessProbe", {}).get("httpGet", {}), c.get("livenessProbe", {}).get("httpGet", {})
    check(rp.get("path") == "/readyz" and rp.get("port") in port, "readiness probe: GET /readyz on the container's port")
    check(lp.get("path") == "/healthz" and lp.get("port") in port, "liveness probe: GET /healthz on the container's port")
    args = c["args"]
    flags = [a for a in args if a.startswith("--")]
    check(all(f in known for f in flags), "every tlserverd flag is one tlserverd --help lists",
          [f for f in flags if f not in known])
    listen = args[args.index("--listen") + 1] if "--listen" in args else ""
    check(listen.endswith(":%d" % port["http"]), "--listen uses the container's port", listen)
    check("--tokens" in args, "a non-loopback --listen comes with --tokens")
    tier = args[args.index("--tier") + 1] if "--tier" in args else ""
    rport = svcs["tlserverd-redis"]["spec"]["ports"][0]["port"]
    check(tier == "redis://tlserverd-redis:%d" % rport, "--tier names the Redis Service", tier)

# ---- 4. the Dockerfile ----
text = open("deploy/Dockerfile").read()
stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.M)
check(len(stages) >= 2 and stages[-1] == "runtime", "a multi-stage build ending in the runtime stage", stages)
runtime = text[text.rindex("AS runtime"):]
user = re.findall(r"^USER\s+(\S+)", runtime, re.M)
check(user and re.fullmatch(r"[1-9][0-9]*(:[1-9][0-9]*)?", user[-1]) is not None, "runs as a numeric non-root user", user)
installed = set(re.findall(r"\b(lib[a-z0-9.+-]+|clang-[0-9]+|lld-[0-9]+)\b", runtime.split("COPY")[0]))
needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", os.path.join(B, "bin", "tlserverd")],
                                                       capture_output=True, text=True).stdout)
paths = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(["ldd", os.path.join(B, "bin", "tlserverd")],
                                                             capture_output=True, text=True).stdout, re.M))
for lib in needed:
    if re.match(r"lib(asan|ubsan|lsan|tsan)\.so", lib):
        continue  # a sanitizer build's runtime (make SANITIZE=...), never the image's
    pkg = ""
    for path in (paths.get(lib, lib), os.path.realpath(paths.get(lib, lib))):  # merged /usr: either name
        for cand in (path, path[4:] if path.startswith("/usr/") else "/usr" + path):
            owner = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True).stdout
            pkg = pkg or (owner.split(":")[0] if owner else "")
    if pkg in ("libc6",):
        continue  # in every Debian image
    check(pkg in installed, "the runtime stage installs %s (for %s)" % (pkg or "?", lib), sorted(installed))
check("EXPOSE 8470" in runtime and "VOLUME /var/lib/tlserverd" in runtime
      and '"--db", "/var/lib/tlserverd/cache.db"' in runtime, "EXPOSE, VOLUME and --db agree")

# ---- 5. Redis's password as a file, run for real ----
# Each deploy file's own command line (its specifiers, paths and secret
# files stood in for by temporary ones, made as its comments say) is run
# against a redis-server that wants a password: the tier must be up, and
# the password in no argument or environment variable of any process.
REDIS_PW = "deploy-files-secret-%d" % os.getpid()


def free_port():
    import socket
    so = socket.socket()
    so.bind(("127.0.0.1", 0))
    p_ = so.getsockname()[1]
    so.close()
    return p_


def secret_file(path, text, mode=0o600):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def readyz(port, secs=20):
    import time, urllib.request, urllib.error
    end = time.time() + secs
    while time.time() < end:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=2) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())
        except Exception:
            time.sleep(0.1)
    return None


def no_password_in(pid, what):
    for part in ("cmdline", "environ"):
        try:
            data = open("/proc/%d/%s" % (pid, part), "rb").read().decode(errors="replace")
        except OSError:
            continue
        check(REDIS_PW not in data, "%s: the password is not in its %s" % (what, part))


def run_tlserverd(argv, port, what):
    """Starts argv (a tlserverd command line listening on 127.0.0.1:port) and
    checks that it reaches the Redis with the password from its file."""
    log = open(os.path.join(tmp, "server.log"), "w+")
    p_ = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={"PATH": os.environ["PATH"]})
    try:
        import time
        # the first ping may race the start, and the tier pings each primary once a second: ask
        # until it is up, for 10 s at most (on a loaded machine a second's ping may come late)
        deadline = time.time() + 10
        r = readyz(port)
        state = r and r.get("tier", {}).get("state")
        while state != "up" and time.time() < deadline:
            time.sleep(0.2)
            r = readyz(port, 5)
            state = r and r.get("tier", {}).get("state")
        log.seek(0)
        check(state == "up", "%s: the tier is up with Redis's password from its file" % what,
              json.dumps(r)[:300] if r else log.read()[-400:])
        no_password_in(p_.pid, what)
    finally:
        p_.terminate()
        try:
            p_.wait(20)
        except subprocess.TimeoutExpired:
            p_.kill()
            p_.wait()


redis_conf = os.path.join(tmp, "redis.conf")
if not shutil.which("redis-server"):
    skip("deploy files against a Redis with a password", "no redis-server")
    redis = None
else:
    import shlex, time
    rport = free_port()
    secret_file(redis_conf, "requirepass %s\n" % REDIS_PW)
    redis = subprocess.Popen(["redis-server", redis_conf, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        pong = subprocess.run(["redis-cli", "-p", str(rport), "--no-auth-warning", "-a", REDIS_PW, "ping"],
                              capture_output=True, text=True).stdout.strip()
        if pong == "PONG":
            break
        time.sleep(0.05)
    if pong != "PONG":
        skip("deploy files against a Redis with a password", "redis-server did not start")
        redis.kill()
        redis = None
if redis:
    try:
        no_password_in(redis.pid, "redis-server with its configuration file")
        tlserverd = os.path.join(B, "bin", "tlserverd")
        # the template unit: LoadCredential= copies /etc/tlserverd/redis-auth into %d
        text = open("deploy/tlserverd@.service").read()
        cred = re.search(r"^LoadCredential=([\w-]+):(/\S+)$", text, re.M)
        check(cred is not None and cred.group(2) == "/etc/tlserverd/redis-auth",
              "deploy/tlserverd@.service: Redis's password through LoadCredential=")
        execstart = re.search(r"^ExecStart=(.*)$", text, re.M).group(1)
        check(cred is not None and ("--tier-auth-file %%d/%s" % cred.group(1)) in execstart,
              "deploy/tlserverd@.service: ExecStart passes the credential's path to --tier-auth-file")
        envline = re.search(r"echo '(TLSERVERD_ARGS=[^']*)' >/etc/tlserverd/replicas.env", text).group(1)
        check("--tier redis://" in envline, "deploy/tlserverd@.service: its replicas.env example names a tier")
        port = free_port()
        creds = os.path.join(tmp, "credentials")
        if cred:
            secret_file(os.path.join(creds, cred.group(1)), REDIS_PW + "\n", 0o400)  # as systemd makes it
        state = os.path.join(tmp, "state")
        os.makedirs(os.path.join(state, "tlserverd", str(port)), exist_ok=True)
        line = (execstart.replace("%i", str(port)).replace("%S", state).replace("%d", creds)
                .replace("$TLSERVERD_ARGS", envline.split("=", 1)[1]).replace("127.0.0.1:6379", "127.0.0.1:%d" % rport)
                .replace("/usr/local/bin/tlserverd", tlserverd))
        run_tlserverd(shlex.split(line), port, "deploy/tlserverd@.service's ExecStart")
        for unit in ("deploy/tlserverd.service", "deploy/tlserverd@.service"):
            check(not re.search(r"^(Environment|PassEnvironment|SetCredential)=", open(unit).read(), re.M),
                  "%s: no secret through Environment=, PassEnvironment= or SetCredential=" % unit)
        # Kubernetes: the Secret's files, the init container's copy, the manifests' arguments
        if yaml:
            rc = deps["tlserverd-redis"]["spec"]["template"]["spec"]["containers"][0]
            tc = deps["tlserverd"]["spec"]["template"]["spec"]
            for c in [rc] + tc.get("initContainers", []) + tc["containers"]:
                check(not c.get("env") and not c.get("envFrom"), "k8s %s: no environment variables (secrets are files)"
                      % c["name"])
            rmounts = {m["name"]: m["mountPath"] for m in rc["volumeMounts"]}
            rvols = {v["name"]: v for v in deps["tlserverd-redis"]["spec"]["template"]["spec"]["volumes"]}
            conf = rc["args"][0]
            confvol = [n for n, mp in rmounts.items() if conf.startswith(mp + "/")]
            check(len(confvol) == 1 and rvols[confvol[0]].get("secret", {}).get("secretName") == "tlserverd-redis",
                  "k8s redis: its configuration file (requirepass) comes from the Secret tlserverd-redis")
            sources = [s_["secret"] for v in tc["volumes"] if "projected" in v for s_ in v["projected"]["sources"]]
            check(any(s_["name"] == "tlserverd-redis" and s_["items"] == [{"key": "password", "path": "redis-auth"}]
                      for s_ in sources), "k8s tlserverd: the Secret tlserverd-redis's password is mounted as a file")
            init = " ".join(tc["initContainers"][0]["command"])
            targs = c["args"]
            authf = targs[targs.index("--tier-auth-file") + 1] if "--tier-auth-file" in targs else ""
            check(authf and ("install -m 600 /secret/redis-auth %s" % authf) in init,
                  "k8s tlserverd: --tier-auth-file is the init container's mode-600 copy", authf)
            # run them: Redis with its arguments (the Secret's redis.conf), tlserverd with its arguments
            kdir = os.path.join(tmp, "k8s")
            secret_file(os.path.join(kdir, "secret", "tokens"), "k8s-deploy-files-token-0123 admin\n", 0o440)
            secret_file(os.path.join(kdir, "secret", "redis-auth"), REDIS_PW + "\n", 0o440)
            os.makedirs(os.path.join(kdir, "run", "tlserverd"))
            r = subprocess.run(["/bin/sh", "-c", tc["initContainers"][0]["command"][-1]
                                .replace("/secret/", kdir + "/secret/").replace("/run/tlserverd/", kdir + "/run/tlserverd/")],
                               capture_output=True, text=True)
            check(r.returncode == 0, "k8s tlserverd: the init container's command copies the secrets", r.stderr)
            kport = free_port()
            kargs = [a.replace("/run/tlserverd/", kdir + "/run/tlserverd/") for a in targs]
            kargs[kargs.index("--listen") + 1] = "127.0.0.1:%d" % kport
            kargs[kargs.index("--tier") + 1] = "redis://127.0.0.1:%d" % rport
            run_tlserverd([tlserverd, "--db", os.path.join(kdir, "cache.db")] + kargs, kport,
                          "k8s tlserverd's arguments")
            rc2port = free_port()
            r2 = subprocess.Popen(["redis-server", redis_conf] + rc["args"][1:] + ["--port", str(rc2port), "--bind",
                                  "127.0.0.1", "--dir", kdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                ans = ""
                for _ in range(200):
                    ans = subprocess.run(["redis-cli", "-p", str(rc2port), "get", "x"], capture_output=True,
                                         text=True).stdout.strip()
                    if ans:
                        break
                    time.sleep(0.05)
                check(ans.startswith("NOAUTH"), "k8s redis: its arguments with the Secret's redis.conf want a password",
                      ans)
            finally:
                r2.terminate()
                r2.wait()
        # the container image: the Dockerfile's example, its secrets in a mounted folder
        text = open("deploy/Dockerfile").read()
        check(not re.search(r"^\s*(ENV|ARG)\s+\S*(PASS|TOKEN|SECRET)", text, re.M | re.I),
              "deploy/Dockerfile: no secret in an ENV or ARG")
        ex = re.search(r"^#\s+docker run ((?:.*\\\n#)*[^\n]*--tier-auth-file[^\n]*)", text, re.M)
        check(ex is not None, "deploy/Dockerfile: an example with --tier-auth-file")
        if ex:
            words = shlex.split(re.sub(r"\\\n#", " ", ex.group(1)))
            mounts = dict(w.split(":")[:2] for i, w in enumerate(words) if i and words[i - 1] == "-v")
            image = [w for w in words if w.startswith("tlserverd:")][0]
            entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M).group(1))
            dargs = words[words.index(image) + 1:]
            ddir = os.path.join(tmp, "docker")
            sec = [m for m in mounts.values() if m.startswith("/run/secrets")][0]
            secret_file(os.path.join(ddir, "secrets", "tokens"), "docker-deploy-files-token-0123 admin\n")
            secret_file(os.path.join(ddir, "secrets", "redis-auth"), REDIS_PW + "\n")
            dport = free_port()
            argv = [a.replace(sec, os.path.join(ddir, "secrets")).replace("/var/lib/tlserverd", ddir)
                    for a in entry + dargs]
            argv[0] = tlserverd
            argv[argv.index("--listen") + 1] = "127.0.0.1:%d" % dport
            argv[argv.index("--tier") + 1] = "redis://127.0.0.1:%d" % rport
            run_tlserverd(argv, dport, "deploy/Dockerfile's entry point and example")
    finally:
        redis.terminate()
        redis.wait()

shutil.rmtree(tmp, ignore_errors=True)
if fails:
    print("FAIL: %d failed" % fails)
    sys.exit(1)
if skips:
    print("deploy_files.sh: skipped: %s" % ", ".join(skips), file=sys.stderr)
    sys.exit(77)
print("PASS")
PYEOF
