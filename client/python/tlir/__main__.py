"""python3 -m tlir emit FILE.py FUNCTION [NAME=VALUE]...

Prints the Tile IR document of the prim_func that FUNCTION returns when
called with the NAME=VALUE keyword arguments (values read as Python
literals: 128, 1e-5, True, 'float16'; anything else is a string), or of
FUNCTION itself when it is a prim_func or a kernel (for a @tilelang.jit
function, the prim_func it returns; nothing is compiled, so tlc is not
needed).  Errors are printed as
FILE:LINE: error: MESSAGE; exit status 1 for them, 2 for a wrong command
line.
"""

import ast
import importlib.util
import os
import sys

from . import JITKernel, PrimFunc, TlirError

USAGE = "usage: python3 -m tlir emit FILE.py FUNCTION [NAME=VALUE]...\n"


def _load(path):
    spec = importlib.util.spec_from_file_location(
        "_tlir_user_" + os.path.splitext(os.path.basename(path))[0], path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(mod)
    return mod


def emit(path, fname, assigns):
    kwargs = {}
    for a in assigns:
        name, eq, val = a.partition("=")
        if not eq or not name.isidentifier():
            sys.stderr.write("tlir: argument '%s' is not NAME=VALUE\n" % a + USAGE)
            return 2
        try:
            kwargs[name] = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            kwargs[name] = val
    if not os.path.isfile(path):
        sys.stderr.write("tlir: cannot read '%s'\n" % path)
        return 2
    try:
        mod = _load(path)
        if not hasattr(mod, fname):
            raise TlirError("'%s' has no function '%s'" % (path, fname))
        f = getattr(mod, fname)
        if isinstance(f, (PrimFunc, JITKernel)):
            if kwargs:
                raise TlirError("'%s' is a prim_func; it takes no NAME=VALUE arguments" % fname)
            r = f
        elif hasattr(f, "get_tir"):  # @tilelang.jit: the prim_func, without compiling it
            r = f.get_tir(**kwargs)
        else:
            r = f(**kwargs)
        if isinstance(r, JITKernel):
            r = r.func
        if not isinstance(r, PrimFunc):
            raise TlirError("%s(...) returned %s, not a @T.prim_func" % (fname, type(r).__name__))
    except TlirError as e:
        sys.stderr.write(str(e) + "\n")
        return 1
    sys.stdout.write(r.script() + "\n")
    return 0


def main(argv):
    if len(argv) >= 1 and argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE + __doc__.split("\n", 2)[2])
        return 0
    if len(argv) < 3 or argv[0] != "emit":
        sys.stderr.write(USAGE)
        return 2
    return emit(argv[1], argv[2], argv[3:])


def console_main():
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    console_main()
