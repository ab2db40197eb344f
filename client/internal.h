/*
 * internal.h - what the files of libtlclient share and nobody else sees:
 * the client's fields, the HTTP layer (http.c), the kernel metadata and the
 * evaluation of its expressions (meta.c), the launch plan (meta.c, used by
 * the launcher launch.c), and the local cache glue (fetch.c).  Tests
 * include it to check the parts that need no server and no GPU.
 */
#ifndef TL_CLIENT_INTERNAL_H
#define TL_CLIENT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../cache/tlcache.h"
#include "../compiler/dtype.h"
#include "../compiler/gpudrv.h"
#include "../compiler/ir.h"
#include "include/tl/tlclient.h"

/* ---- the client ------------------------------------------------------------------ */
#define TL_CLIENT_COMPILER_ID_MAX 128 /* bytes of a server's compiler identity */

struct tl_client {
  char *server;              /* base URLs without a trailing '/', comma-separated */
  int nservers;              /* how many; a request that cannot reach one goes on to the next */
  int current;               /* the one requests go to now */
  char *token;               /* NULL: none */
  char *ca_file;             /* NULL: the system's store */
  long connect_timeout_ms, timeout_ms;
  int retries;
  long backoff_base_ms, backoff_max_ms;
  char *cache_path;          /* NULL: no local cache */
  int64_t cache_max_bytes;
  bool offline;
  tl_client_log_fn log_fn;
  void *log_user;

  void *curl;                /* CURL *, made on first use and kept for keep-alive */
  void *headers;             /* struct curl_slist * of the current request */
  tl_cache *cache;           /* opened on first use */
  bool cache_failed;         /* opening it failed once: not tried again */
  uint64_t rng;              /* jitter */
  tl_client_stats stats;

  /* The compiler identity of the server (/v1/info's "compiler"), part of
   * every request key: learned from the server in this process (known),
   * else the one the local cache remembers for this server (fetch.c). */
  char compiler_id[TL_CLIENT_COMPILER_ID_MAX + 1];
  bool compiler_id_known;    /* learned from the server by this handle */
  bool compiler_id_probed;   /* GET /v1/info was tried for it */

  char *tuning;              /* tl_client_set_tuning: a device name, "auto", or NULL (off) */
  bool tuning_applied;       /* inside a call that applied it already */
  /* tune.c: the server's answers to tuning lookups, kept tuning_ttl_ms
   * (TL_CLIENT_TUNING_MEMO entries, allocated on first use) */
  struct tl_tuning_memo *tuning_memo;
  long tuning_ttl_ms;

  /* tl_client_set_bundle: mapped and checked once (cache/tlbundle.h), and
   * shared by the clients tl_client_dup makes; the last one closes it */
  char *bundle_path;         /* NULL: none */
  struct tl_bundle *bundle;
  atomic_int *bundle_refs;
};

/* The base URL requests go to now: *len bytes at the result (inside c->server). */
const char *tl_client_base_url(const tl_client *c, size_t *len);

/* Logs one formatted line through the client's log function, if any. */
void tl_clog(tl_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- HTTP (http.c) ------------------------------------------------------------------ */
typedef struct tl_http_response {
  long status;        /* HTTP status of the last try (0 when none arrived) */
  char *body;         /* NUL-terminated, malloc'd */
  size_t len;
  long retry_after;   /* seconds from Retry-After, or -1 */
} tl_http_response;

/* Sends METHOD server+path with an optional JSON body and reads the answer
 * (at most max_bytes of body), retrying on connection errors and 503/429 as
 * the client's settings say.  Returns TL_OK when an answer arrived (any
 * status other than a 503/429 that outlasted the retries: check
 * resp->status), TL_BUSY when the server still answered 503/429 after the
 * retries (resp holds that answer), TL_NETWORK when no answer came (err
 * says why, naming the URL), TL_TOO_LARGE when the body exceeded
 * max_bytes, TL_NOMEM.  resp must be freed with tl_http_response_free in
 * every case. */
tl_status tl_http_request(tl_client *c, const char *method, const char *path, const char *body,
                          size_t body_len, size_t max_bytes, tl_http_response *resp, tl_error *err);
/* The same with a body of another Content-Type (a bundle:
 * "application/octet-stream"). */
tl_status tl_http_request_as(tl_client *c, const char *method, const char *path, const char *content_type,
                             const char *body, size_t body_len, size_t max_bytes, tl_http_response *resp,
                             tl_error *err);
void tl_http_response_free(tl_http_response *resp);

/* Turns an error answer into a status and a message "WHAT: MESSAGE" (with
 * the server's diagnostics, when any, one per line after it).  The code is
 * the JSON body's error.code when it is one of tl_status's wire names, else
 * derived from the HTTP status.  Returns the status. */
tl_status tl_http_error(const tl_http_response *resp, const char *what, tl_error *err);
/* The same for one parsed error object (json_t *) and its diagnostics. */
tl_status tl_http_error_json(void *error_obj, void *diagnostics, long http_status, const char *what,
                             tl_error *err);

/* ---- kernel metadata (meta.c) ------------------------------------------------------------ */
typedef struct tl_meta_param {
  const char *name;
  bool is_tensor;
  tl_dtype dtype;
  int ndim;
  tl_expr *shape[TL_KERNEL_DIMS_MAX]; /* parsed: E_CONST, or an expression over scalar params */
  int64_t align;
} tl_meta_param;

/* A tensor map the kernel takes after its params (format 2,
 * proto/kernel-meta.md section 5): parsed and checked, its dimensions and
 * strides evaluated at each launch. */
#define TL_META_TMAPS_MAX 8
#define TL_META_KERNELS_MAX TL_MAX_KERNELS
typedef struct tl_meta_tmap {
  int param;                                /* index of the tensor param */
  int rank;
  tl_expr *dims[TL_GPU_TMAP_RANK_MAX];      /* innermost first */
  tl_expr *strides[TL_GPU_TMAP_RANK_MAX - 1];
  tl_gpu_tmap enc;                          /* all but addr, dims and strides */
  int64_t offset;                           /* in the parameter buffer; -1 when not given (PTX) */
} tl_meta_tmap;

typedef struct tl_meta {
  tl_arena *arena;
  const char *entry;
  const char *target;     /* may be "" when absent */
  bool ptx;               /* "binary": "ptx" */
  int nparams;
  tl_meta_param *params;
  int ngrid;
  tl_expr *grid[3];
  int64_t block[3];
  int64_t dyn_smem;
  int ncluster;
  int64_t cluster[3];
  int persistent;         /* launch.persistent: at most this many blocks per multiprocessor walk the grid's
                             blocks (tiles); 0: one block per tile */
  bool programmatic;      /* launch.programmatic: the kernel waits for the one before it (griddepcontrol.wait),
                             so it is launched with programmatic stream serialization where the driver has it */
  int format;             /* 1, or 2 with tensor maps, or 3 with several kernels and workspaces */
  int ntmaps;
  tl_meta_tmap tmaps[TL_META_TMAPS_MAX];
  /* format 3 (proto/kernel-meta.md section 6): the kernels launched in order, each with the params
   * above and then the workspaces as tensor params (their shapes evaluated like a tensor's) */
  int nkernels;           /* 0 in formats 1 and 2 */
  struct tl_meta *kernels[TL_META_KERNELS_MAX];
  int nworkspaces;
  bool ws_zeroed[TL_MAX_WORKSPACES]; /* "zeroed": all zeros at each launch's start; the launch leaves it so */
} tl_meta;

/* The bytes of each workspace of a format-3 m for a launch with args (the
 * caller's, nargs == m->nparams), each placed at a multiple of
 * TL_META_WORKSPACE_ALIGN: offsets[j], and *total, at most
 * TL_MAX_WORKSPACE_BYTES (TL_LIMIT past it). */
#define TL_META_WORKSPACE_ALIGN 256
tl_status tl_meta_workspaces(const tl_meta *m, const tl_kernel_arg *args, int nargs, uint64_t *offsets,
                             uint64_t *total, tl_error *err);

/* Parses and validates metadata JSON text (proto: compile.c's metadata()).
 * Every expression is parsed and its names checked against the scalar
 * parameters here, so a launch cannot meet a malformed one.  TL_BAD_JSON
 * (not JSON), TL_CORRUPT (JSON of the wrong shape: the message names the
 * member), TL_UNSUPPORTED (a scalar dtype the launcher cannot pass),
 * TL_NOMEM.  *out is freed with tl_meta_free (NULL is fine). */
tl_status tl_meta_parse(const char *text, tl_meta **out, tl_error *err);
void tl_meta_free(tl_meta *m);

/* Evaluates the grid / a tensor's shape (see tl_artifact_grid). */
tl_status tl_meta_grid(const tl_meta *m, const tl_kernel_arg *args, int nargs, int64_t grid[3],
                       tl_error *err);
tl_status tl_meta_shape(const tl_meta *m, int param, const tl_kernel_arg *args, int nargs,
                        int64_t shape[TL_KERNEL_DIMS_MAX], tl_error *err);

/* Everything a launch needs, computed and checked without a GPU. */
typedef union tl_launch_value {
  int32_t i32;
  int64_t i64;
  float f32;
  unsigned char b;
  uint64_t ptr;
} tl_launch_value;

typedef struct tl_launch_plan {
  unsigned grid[3], block[3];
  unsigned dyn_smem;
  bool empty;                              /* a zero grid dimension: nothing to launch */
  tl_launch_value values[TL_KERNEL_PARAMS_MAX];
  /* &values[i], then &tmaps[j]; valid while the plan does not move */
  void *kargs[TL_KERNEL_PARAMS_MAX + TL_META_TMAPS_MAX];
  int ntmaps;
  tl_gpu_tmap tmap_args[TL_META_TMAPS_MAX]; /* for tl_gpu_tensor_map, checked */
  _Alignas(64) unsigned char tmaps[TL_META_TMAPS_MAX][TL_GPU_TMAP_BYTES]; /* encoded by the launcher */
} tl_launch_plan;

/* Checks args against m (count, kinds, ranges, alignment of tensor
 * pointers) and fills plan, with the arguments of each tensor map
 * (tmap_args: dimensions and strides evaluated and checked as
 * cuTensorMapEncodeTiled demands; the launcher encodes them into tmaps).
 * Errors as for tl_kernel_launch. */
tl_status tl_launch_plan_make(const tl_meta *m, const tl_kernel_arg *args, int nargs,
                              tl_launch_plan *plan, tl_error *err);

/* Whether a binary for target runs on a GPU of architecture arch:
 * sm_NN[f] needs the same major and a minor at least NN's, sm_NNa exactly
 * NN, compute_NN any arch >= NN, compute_NNa exactly NN.  False for a
 * name that is none of these. */
bool tl_target_runs_on(const char *target, int arch);

/* ---- artifacts (fetch.c) ------------------------------------------------------------------ */
struct tl_artifact {
  char key[65];
  char id[65];
  char target[TL_CLIENT_TARGET_MAX + 1];
  unsigned char *bytes;
  size_t n;
  char *metadata;
  tl_meta *meta;
  tl_source source;
};

/* Validates a target name: 1 to TL_CLIENT_TARGET_MAX characters of a-z,
 * 0-9 and '_'. */
tl_status tl_target_check(const char *target, tl_error *err);

/* The request key of req for target and the server's compiler identity
 * (see tlclient.h; "" or NULL: none known) and the canonical text it hashes (malloc'd; NULL allowed when not wanted). */
tl_status tl_request_key(const tl_client_request *req, const char *target, const char *compiler, char key[65],
                         char **text, tl_error *err);

/* The canonical text of req's program (x- members removed; malloc'd) and
 * its constant overrides (a json_t * object, the caller's reference). */
tl_status tl_request_canonical(const tl_client_request *req, char **program, void **constants, tl_error *err);

/* A request with a tuning record's constants added (tune.c). */
typedef struct tl_tuned {
  tl_client_request req;     /* the request to use */
  tl_client_define *defs;
  char **names, **values;
  int n;                     /* constants added */
} tl_tuned;

/* When c's tuning is on for device (a description; NULL: off) and a record
 * exists, fills t and returns true (tl_tuned_free it); else false, and req
 * is used as it is. */
bool tl_tuning_apply(tl_client *c, const tl_client_request *req, const char *device, tl_tuned *t);
/* Forgets every tuning answer kept (a new server, tuning set again, freed). */
void tl_tuning_memo_clear(tl_client *c);
void tl_tuned_free(tl_tuned *t);

/* The alias manifest's first line: a local cache entry under a request key
 * has a manifest starting with this, followed by "build KEY". */
#define TL_CLIENT_ALIAS_MAGIC "tl-client-request 1\n"
/* Drops c's reference to its bundle (bundle.c); the last one closes it. */
void tl_client_bundle_release(tl_client *c);

/* The local cache, opened on first use; NULL when off or unusable (fetch.c). */
tl_cache *tl_client_local(tl_client *c);

/* The alias manifest of a request (its canonical text, as tl_request_key
 * gives it) naming build: TL_CLIENT_ALIAS_MAGIC, "build KEY", then the rest
 * of the text, program included when the whole fits TL_CACHE_TEXT_MAX
 * (else without the program line).  malloc'd; NULL when out of memory. */
char *tl_alias_manifest(const char *build, const char *request_text);

/* The request text an alias manifest was made from, malloc'd, when the
 * alias holds it whole (it hashes to key); else NULL (an alias without its
 * program, stored by an older client or too large). */
char *tl_alias_request_text(const char *manifest, const char *key);

/* The name of the local cache's note listing the compiler identities of the
 * bundles imported into it (one per line). */
#define TL_NOTE_IMPORTED_COMPILERS "imported bundle compilers"

#define TL_BUILD_MANIFEST_MAGIC "tl-build-key 1\n" /* the first line of a key manifest (proto/kernel-meta.md) */

#endif
