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
#
# Exit status: 0 pass, 1 fail, 77 when a part could not run here (no
# systemd-analyze, no PR_SET_MDWE, no NVRTC or clang, no kubectl, no
# PyYAML): the last line on stderr names them.

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

shutil.rmtree(tmp, ignore_errors=True)
if fails:
    print("FAIL: %d failed" % fails)
    sys.exit(1)
if skips:
    print("deploy_files.sh: skipped: %s" % ", ".join(skips), file=sys.stderr)
    sys.exit(77)
print("PASS")
PYEOF
