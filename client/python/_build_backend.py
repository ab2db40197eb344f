"""_build_backend.py - the PEP 517 build backend of tlir, standard library
only, so that `pip install ./client/python` works offline.

Needs: pyproject.toml ([project] name, version, requires-python, scripts)
and the tlir/ package beside this file.
Produces: a pure-Python wheel (tlir/*.py, the .dist-info with METADATA,
WHEEL, entry_points.txt and RECORD), for build_wheel and build_editable
(the editable wheel holds a .pth file pointing at this directory).
"""

import base64
import hashlib
import os
import tomllib
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _files():
    out = []
    for d, _, names in os.walk(os.path.join(HERE, "tlir")):
        if "__pycache__" in d:
            continue
        for n in sorted(names):
            if n.endswith(".py"):
                p = os.path.join(d, n)
                out.append((os.path.relpath(p, HERE).replace(os.sep, "/"), open(p, "rb").read()))
    return out


def _wheel(directory, files):
    p = _project()
    name, version = p["name"], p["version"]
    info = "%s-%s.dist-info" % (name, version)
    meta = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version,
            "Summary: " + p.get("description", ""), "Requires-Python: " + p.get("requires-python", "")]
    for extra, reqs in p.get("optional-dependencies", {}).items():
        meta.append("Provides-Extra: " + extra)
        meta += ["Requires-Dist: %s; extra == \"%s\"" % (r, extra) for r in reqs]
    files = list(files) + [
        (info + "/METADATA", ("\n".join(meta) + "\n").encode()),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: tlir _build_backend\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
        (info + "/entry_points.txt", ("[console_scripts]\n" + "".join(
            "%s = %s\n" % kv for kv in p.get("scripts", {}).items())).encode())]
    record = []
    whl = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(directory, whl), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(path, data)
            h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (path, h, len(data)))
        record.append(info + "/RECORD,,")
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return whl


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, _files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, [("tlir_editable.pth", (HERE + "\n").encode())])


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []
