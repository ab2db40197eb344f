/*
 * ptxas.c - PTX to cubin by ptxas run as a process (ptxas.h), the
 * whole-program assembler of the direct PTX back end.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "procs.h"
#include "ptxas.h"

struct tl_ptxas {
  char path[PATH_MAX];
  char version[64];
};

static void tried_add(char *tried, size_t cap, const char *path, const char *why) {
  size_t n = strlen(tried);
  if (n < cap)
    snprintf(tried + n, cap - n, "%s%.300s (%s)", n ? ", " : "", path, why);
}

/* path is an executable ptxas; else says why not in tried. */
static int candidate(const char *path, char *tried, size_t cap) {
  if (tl_proc_is_exec(path))
    return 1;
  tried_add(tried, cap, path, "not an executable file");
  return 0;
}

/* Its version, from "Cuda compilation tools, release 13.0, V13.0.88". */
static tl_status ask_version(tl_ptxas *h, tl_error *err) {
  char *argv[] = {h->path, "--version", NULL};
  int code = 0;
  char *text = NULL;
  tl_status st = tl_proc_run_capture(argv, tl_proc_now_ms() + 20000, 4096, &code, &text, err);
  if (st != TL_OK)
    return tl_error_set(err, TL_NO_TOOLCHAIN, "%s --version failed: %s", h->path, err ? err->message : "");
  const char *v = text ? strstr(text, ", V") : NULL;
  size_t n = v ? strspn(v + 3, "0123456789.") : 0;
  if (code != 0 || n == 0 || n >= sizeof h->version) {
    st = tl_error_set(err, TL_NO_TOOLCHAIN, "%s --version did not say its version (exit %d): %.200s", h->path, code,
                      text ? text : "");
  } else {
    memcpy(h->version, v + 3, n);
    h->version[n] = 0;
  }
  free(text);
  return st;
}

tl_status tl_ptxas_open(const char *beside_dir, tl_ptxas **out, tl_error *err) {
  *out = NULL;
  tl_ptxas *h = calloc(1, sizeof *h);
  if (!h)
    return tl_error_set(err, TL_NOMEM, "out of memory opening ptxas");
  char tried[1024] = "";
  int found = 0;
  const char *env = getenv("TL_PTXAS");
  if (env && *env) {
    snprintf(h->path, sizeof h->path, "%s", env);
    found = candidate(h->path, tried, sizeof tried);
  } else {
    static const char *const up[] = {"../bin", "../../../bin"};
    for (size_t i = 0; !found && beside_dir && i < sizeof up / sizeof *up; i++) {
      char p[PATH_MAX];
      if (snprintf(p, sizeof p, "%s/%s/ptxas", beside_dir, up[i]) >= (int)sizeof p)
        continue;
      if (!realpath(p, h->path))
        snprintf(h->path, sizeof h->path, "%s", p);
      found = candidate(h->path, tried, sizeof tried);
    }
    if (!found) {
      snprintf(h->path, sizeof h->path, "/usr/local/cuda/bin/ptxas");
      found = candidate(h->path, tried, sizeof tried);
    }
    if (!found && !(found = tl_proc_find_on_path("ptxas", h->path, sizeof h->path)))
      tried_add(tried, sizeof tried, "$PATH", "no ptxas");
  }
  tl_status st = found ? ask_version(h, err)
                       : tl_error_set(err, TL_NO_TOOLCHAIN, "ptxas is not available: tried %s%s", tried,
                                      env && *env ? " (TL_PTXAS)" : "");
  if (st != TL_OK) {
    free(h);
    return st;
  }
  *out = h;
  return TL_OK;
}

void tl_ptxas_describe(const tl_ptxas *h, char *buf, size_t cap) {
  snprintf(buf, cap, "ptxas %s (%s)", h->version, h->path);
}

tl_status tl_ptxas_assemble(tl_ptxas *h, const char *ptx, const char *arch, int max_registers, tl_toolchain_out *out,
                            tl_error *err) {
  memset(out, 0, sizeof *out);
  char dir[PATH_MAX], in[PATH_MAX + 16], bin[PATH_MAX + 16], logp[PATH_MAX + 16];
  double deadline = tl_proc_now_ms() + TL_PTXAS_TIMEOUT_MS;
  tl_status st = tl_proc_tmpdir(dir, sizeof dir, "tl-ptxas", err);
  if (st != TL_OK)
    return st;
  snprintf(in, sizeof in, "%s/kernel.ptx", dir);
  snprintf(bin, sizeof bin, "%s/kernel.cubin", dir);
  snprintf(logp, sizeof logp, "%s/log", dir);
  char a[48], reg[48];
  snprintf(a, sizeof a, "-arch=%s", arch);
  snprintf(reg, sizeof reg, "-maxrregcount=%d", max_registers);
  char *argv[] = {h->path, a, "-O3", "-v", "-o", bin, in, NULL, NULL};
  if (max_registers) {
    argv[7] = in;
    argv[6] = reg;
  }
  int code = 0;
  FILE *lf = NULL;
  if ((st = tl_proc_write_file(in, ptx, strlen(ptx), err)) == TL_OK && !(lf = fopen(logp, "w+")))
    st = tl_error_set(err, TL_IO, "cannot create %s", logp);
  if (st == TL_OK)
    st = tl_proc_run(argv, fileno(lf), dir, deadline, &code, err);
  if (lf)
    fclose(lf);
  unsigned char *log = NULL;
  size_t n = 0;
  if (tl_proc_read_file(logp, TL_PTXAS_MAX_LOG, 1, &log, &n, NULL) != TL_OK)
    log = (unsigned char *)strdup("");
  out->log = (char *)log;
  if (st == TL_OK && code != 0)
    st = tl_error_set(err, TL_TOOLCHAIN, "ptxas failed to assemble the PTX for %s (exit %d): %.900s", arch, code,
                      log ? (char *)log : "");
  if (st == TL_OK)
    st = tl_proc_read_file(bin, TL_PTXAS_MAX_CUBIN, 0, &out->code, &out->size, err);
  if (st != TL_OK) {
    free(out->code);
    out->code = NULL;
    out->size = 0;
  }
  tl_proc_rmdir(dir);
  return st;
}
