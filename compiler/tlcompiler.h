/*
 * tlcompiler.h - the public API of libtlcompiler: compile a tile program
 * (Tile IR v1 JSON text) for one target, in-process.  This is what the
 * server's compile workers, `tlc compile` and the client call.
 *
 *   tl_compile_key()   parse + check + the build key (cheap: no code
 *                      generation), so a caller can look in a cache first;
 *   tl_compile_key_as() the same for a given compiler identity and
 *                      toolchain, opening no toolchain;
 *   tl_compile()       the whole pipeline: parse, check, passes, CUDA C and
 *                      NVRTC (cubin, PTX) or HIP C and hiprtc/clang (HSACO,
 *                      for gfx targets); gives the binary and its metadata.
 *
 * Build key (docs/DESIGN.md section 4): SHA-256 of the key manifest, a canonical
 * text holding the program (re-serialized with sorted keys, 'x-' fields
 * dropped, so formatting does not matter), the final value of every
 * constant, the target, the options, the compiler's identity
 * (tl_compiler_id) and the toolchain's name and version.  The manifest is returned so a miss can be explained.
 *
 * Thread safety: every function may be called from several threads at once.
 */
#ifndef TL_COMPILER_H
#define TL_COMPILER_H

#include <stddef.h>
#include "../proto/tl_error.h"
#include "ir.h"

#define TL_COMPILER_VERSION "0.1.0"

/* The compiler's identity: "tlc " TL_COMPILER_VERSION "+" and the first 16
 * hex digits of tl_compiler_digest, the SHA-256 (64 hex digits) that the
 * Makefile computes over everything that determines the generated code
 * (libtlcompiler's sources and headers, the proto/ C files, the preludes,
 * the compile flags and the C compiler's version; the Makefile says
 * exactly).  A compiler that may emit different code has a different
 * identity; it is in every build key and every build's metadata
 * (proto/kernel-meta.md), and `tlc --version` and /v1/info report it.
 * Both are defined in the generated $(B)/gen/compiler_id.c. */
extern const char tl_compiler_id[];
extern const char tl_compiler_digest[];

/* What a compile gives.  Everything is owned by the tl_build and freed by
 * tl_build_free. */
typedef struct tl_build {
  char *target;        /* "sm_90a", "compute_80", ... */
  char *key;           /* lowercase hex SHA-256 build key */
  char *manifest;      /* the canonical text the key hashes */
  unsigned char *binary; /* cubin (sm_*), PTX text (compute_*) or HSACO (gfx*) */
  size_t binary_size;
  char *artifact;      /* lowercase hex SHA-256 of binary */
  char *meta;          /* metadata JSON (proto/kernel-meta.md): entry, params, launch, resources,
                          target, versions, compile time, log */
  char *source;        /* the generated CUDA C (or HIP C for gfx targets) */
  char *log;           /* the toolchain's log (may be empty) */
  double compile_ms;   /* wall time of the whole compile */
} tl_build;

/* Called after a stage of the pipeline (a name of tl_compile_stages) with
 * the program as it stands (tl_dump_program prints it), before the
 * verifier checks that stage; for tools. */
typedef void (*tl_dump_fn)(void *user, const char *stage, const tl_program *prog);

/* The stages of tl_compile that a dump may follow, in pipeline order,
 * ended by an entry whose name is NULL: check, place, pipeline, overlap, tma, wspec, range,
 * uniform, barrier, raster; `what` says in a few words what the stage decides. */
typedef struct tl_stage_info {
  const char *name, *what;
} tl_stage_info;
extern const tl_stage_info tl_compile_stages[];

/* One compile request.  options_json may be NULL or a JSON object text
 * (recognized keys are listed in proto/; unknown keys are an error). */
typedef struct tl_compile_request {
  const char *program;      /* JSON text */
  size_t program_len;
  const tl_define *defines; /* constant overrides */
  int ndefines;
  const char *target;
  const char *options_json;
  tl_dump_fn dump;          /* may be NULL */
  void *dump_user;
  bool source_only;         /* stop after generating the source: the build has target, key, manifest
                               and source, no binary, artifact or metadata (tlc --emit cuda|hip|ir) */
  const char *backend;      /* NVIDIA targets: "auto", "cuda" or "ptx"; NULL: the options' "backend",
                               else the environment's TL_BACKEND, else "auto" (tlc --backend) */
  bool verify;              /* run the verifier (verify.c) after each pass, as TL_VERIFY=1 in the
                               environment does: a broken promise of a pass is TL_INTERNAL naming
                               the pass and the statement's pointer */
  int max_statements;       /* > 0: a program of more statements (every kernel's, nested ones included,
                               as the parser counts them) is refused with TL_TOO_LARGE before any pass
                               runs (tlserverd --max-program-statements; 0: TL_MAX_STMTS alone) */
} tl_compile_request;

/* Parses and checks the program and computes the build key and manifest
 * (malloc'd, caller frees) without building a binary: no pass runs, so it
 * is cheap and safe in a server's own thread.  The key names the back end
 * asked for (req->backend; "auto", "cuda" or "ptx", compile.c) and, for an
 * NVIDIA target that the PTX back end may build, nvJitLink's identity
 * beside NVRTC's on its toolchain line; tl_compile chooses the back end by
 * lowering (the metadata's backend says which).  Invalid programs give
 * TL_BAD_PROGRAM with the diagnostics in *diags (diags->arena must be set);
 * malformed JSON gives TL_BAD_JSON; a target that is malformed, not in the
 * target table (target.h) or not offered by its toolchain TL_UNSUPPORTED;
 * no toolchain for the target (NVRTC, or hiprtc/clang for gfx) TL_NO_TOOLCHAIN; a
 * program past req->max_statements TL_TOO_LARGE. */
tl_status tl_compile_key(const tl_compile_request *req, char key[65], char **manifest, tl_diags *diags,
                         tl_error *err);

/* The key and manifest of req as the compiler whose identity is compiler
 * (a manifest's "compiler" line, such as another version's) built it with
 * the toolchain described by toolchain (its "toolchain" line, a build's
 * versions.toolchain), opening no toolchain: how a client rebuilds the
 * manifest of a build it has the request and metadata of, where NVRTC is
 * missing.  Only this compiler's parser and checker run, so the caller
 * compares the key with the build's (another compiler may fold constants
 * otherwise).  For an NVIDIA target set req->backend to the build's
 * metadata's backend_requested (the key names the back end asked for).
 * Failures as tl_compile_key's, with no TL_NO_TOOLCHAIN, and a target that
 * is not in the target table TL_UNSUPPORTED. */
tl_status tl_compile_key_as(const tl_compile_request *req, const char *compiler, const char *toolchain, char key[65],
                            char **manifest, tl_diags *diags, tl_error *err);

/* The whole pipeline.  On success *out is a new tl_build.  Failures as
 * for tl_compile_key, plus, when the program needs what the target lacks
 * (check_target.c), a diagnostic in *diags pointing into the program and
 * the same message and pointer in *err: TL_LIMIT for more shared memory
 * than the target has (the message says by how much), TL_UNSUPPORTED for
 * thread-block clusters below sm_90; TL_UNSUPPORTED for a construct the
 * back end does not handle yet (the message names it), TL_TOOLCHAIN when
 * the toolchain fails (the log is in err->message, truncated). */
tl_status tl_compile(const tl_compile_request *req, tl_build **out, tl_diags *diags, tl_error *err);

void tl_build_free(tl_build *b); /* accepts NULL */

/* The targets this build of the compiler offers: NVIDIA's (from the NVRTC
 * found), then AMD's (from the hiprtc or clang found, amdgpu.h), as a
 * NULL-terminated array owned by the library, and the toolchains'
 * description ("NVRTC 13.0 (libnvrtc.so.13); clang 19.1.7
 * (/usr/bin/clang-19)", only those found), or NULL when neither offers any
 * target (then *err says why, TL_NO_TOOLCHAIN naming both).  The first
 * call opens and probes the toolchains (a fraction of a second). */
const char *const *tl_compiler_targets(const char **toolchain, tl_error *err);
/* The assembler of the PTX back end (and of pass_split.c's builds):
 * "nvJitLink 13.0 (libnvJitLink.so.13)", opened once; NULL when it is not
 * found, with *why (when why is not NULL) saying what was tried. */
const char *tl_compiler_nvjitlink(const char **why);
/* The PTX back end's whole-program assembler (ptxas.h: kernels with
 * setmaxnreg): "ptxas 13.0.88 (/usr/local/cuda/bin/ptxas)", looked for
 * once, beside nvJitLink; NULL when it is not found or does not run, with
 * *why (when why is not NULL) saying why: such kernels then build through
 * NVRTC. */
const char *tl_compiler_ptxas(const char **why);

/* The description of the toolchain that offers target ("sm_90a": the
 * NVRTC's, "gfx942": the AMD one's), or NULL when none does.  Owned by the
 * library. */
const char *tl_compiler_target_toolchain(const char *target);

/* The AMD targets this project knows (amdgpu.h) that the AMD toolchain
 * found does not accept, e.g. gfx950 with clang 19, as a NULL-terminated
 * array owned by the library (empty when no AMD toolchain was found or it
 * accepts them all); tl_compiler_target_refusal says why for each. */
const char *const *tl_compiler_targets_refused(void);

/* Why target is not offered, when it is one of tl_compiler_targets_refused
 * (tl_amdgpu_refusal's text: "clang 19.1.7 (/usr/bin/clang-19) does not
 * know gfx950 (LLVM added it in clang 20): it needs clang 20 or newer, or
 * ROCm's hiprtc"); else NULL.  Owned by the library. */
const char *tl_compiler_target_refusal(const char *target);

#endif
