/*
 * tlbundle.h - bundles: one file that carries a set of builds (binaries,
 * key manifests, metadata) and the client request keys that name them, for
 * a release to ship its kernels and for a cache to be filled from
 * (proto/bundle.md is the format; this header is its reader and writer).
 *
 * Who uses it: `tlclient bundle create|import|ls|verify`, libtlclient's
 * tl_client_set_bundle (an application reading its kernels from a bundle
 * without importing it), and tlserverd's POST /v1/bundles (an import into
 * the server's cache).  It lives beside libtlcache because a bundle is a
 * portable slice of a cache: every entry of it is content-addressed.
 *
 * Trust: tl_bundle_parse checks everything before it returns a bundle: the
 * magic, the version, the announced size, every entry's SHA-256, the
 * trailer's SHA-256 over the whole file, each artifact's id (the SHA-256 of
 * its bytes), each build key (the SHA-256 of its key manifest), each
 * request key (the SHA-256 of its request text), the references between
 * them, duplicates, the limits, and that every build comes from one
 * compiler identity.  A bundle that parses can only be wrong about facts
 * the hashes do not cover (which is why a server still refuses builds of
 * another compiler than its own).
 *
 * Errors (tl_error's message starts with the bundle's name): TL_INVALID_ARG
 * for a file that is not a bundle (no magic) or holds duplicate or dangling
 * entries, TL_UNSUPPORTED for another format version, TL_CORRUPT for a
 * damaged file (truncated, bytes flipped, checksum or key mismatch,
 * malformed records), TL_TOO_LARGE over a limit below, TL_NOMEM, TL_IO.
 */
#ifndef TL_BUNDLE_H
#define TL_BUNDLE_H

#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"
#include "../proto/tl_status.h"

/* ---- the format (proto/bundle.md) --------------------------------------------- */
#define TL_BUNDLE_MAGIC "TLBUNDLE"       /* the first 8 bytes */
#define TL_BUNDLE_VERSION 1              /* the format version this code reads and writes */
#define TL_BUNDLE_HEADER_BYTES 24        /* magic, version, entry count, file size */
#define TL_BUNDLE_ENTRY_HEADER_BYTES 48  /* kind, 7 zero bytes, length, SHA-256 */
#define TL_BUNDLE_TRAILER_BYTES 32       /* SHA-256 of every byte before it */

/* ---- limits ------------------------------------------------------------------- */
#define TL_BUNDLE_ENTRIES_MAX 1000000u               /* entries of one bundle */
#define TL_BUNDLE_ARTIFACT_MAX ((uint64_t)256 << 20) /* bytes of one binary (as TL_CLIENT_ARTIFACT_MAX) */
#define TL_BUNDLE_RECORD_MAX ((uint64_t)8 << 20)     /* bytes of one build or request record (JSON) */
#define TL_BUNDLE_SIZE_MAX ((uint64_t)16 << 30)      /* bytes of a whole bundle (it is mapped whole) */

/* The kinds of entries (the first byte of an entry's header). */
enum { TL_BUNDLE_ARTIFACT = 'A', TL_BUNDLE_BUILD = 'B', TL_BUNDLE_REQUEST = 'R' };

/* ---- reading ------------------------------------------------------------------ */

typedef struct tl_bundle_artifact {
  char id[65];                /* SHA-256 of the bytes, checked */
  const unsigned char *bytes; /* inside the parsed buffer */
  size_t n;
} tl_bundle_artifact;

typedef struct tl_bundle_build {
  char key[65];          /* SHA-256 of manifest, checked */
  char artifact[65];     /* an artifact of the bundle */
  int artifact_index;    /* its index in tl_bundle.artifacts */
  const char *target;    /* the manifest's target line */
  const char *manifest;  /* the key manifest (proto/kernel-meta.md section 4) */
  const char *metadata;  /* metadata JSON text (an object) */
  int64_t compile_ms;
} tl_bundle_build;

typedef struct tl_bundle_request {
  char key[65];          /* SHA-256 of text, checked */
  char build[65];        /* a build of the bundle, of the same target and compiler */
  int build_index;
  const char *text;      /* the canonical request text (client/fetch.c request_text) */
} tl_bundle_request;

typedef struct tl_bundle {
  int version;
  uint64_t size;                /* bytes of the file */
  char checksum[65];            /* the trailer: SHA-256 of the file before it */
  const char *compiler;         /* the compiler identity of every build ("tlc 0.1.0+..."); "" when none */
  int nartifacts, nbuilds, nrequests;
  tl_bundle_artifact *artifacts;
  tl_bundle_build *builds;
  tl_bundle_request *requests;
  void *impl_;                  /* private: the parsed records */
} tl_bundle;

/* Parses and checks the bundle data[0..n) (see Trust above); name is how
 * messages call it (a file name).  On success *out is the caller's
 * (tl_bundle_free) and points into data, which must outlive it; on failure
 * *out is NULL and err says what is wrong and where (the entry's index and
 * byte offset). */
tl_status tl_bundle_parse(const void *data, size_t n, const char *name, tl_bundle **out, tl_error *err);
void tl_bundle_free(tl_bundle *b); /* NULL is fine; data is not touched */

/* The index of the build with this key, of the request with this key, or
 * -1 (binary search: the parser sorts the indexes). */
int tl_bundle_find_build(const tl_bundle *b, const char *key);
int tl_bundle_find_request(const tl_bundle *b, const char *key);

/* A bundle file mapped read-only (mmap) and parsed: what a client keeps
 * open.  TL_IO when the file cannot be opened or mapped, TL_TOO_LARGE over
 * TL_BUNDLE_SIZE_MAX, and tl_bundle_parse's errors.  Release with
 * tl_bundle_close (NULL is fine). */
tl_status tl_bundle_open(const char *path, tl_bundle **out, tl_error *err);
void tl_bundle_close(tl_bundle *b);

/* ---- writing ------------------------------------------------------------------- */

typedef struct tl_bundle_writer tl_bundle_writer;

tl_status tl_bundle_writer_new(tl_bundle_writer **out, tl_error *err);
void tl_bundle_writer_free(tl_bundle_writer *w); /* NULL is fine */

/* Adds a build (fields as in tl_bundle_build; the artifact id is computed
 * from bytes) and, the first time its bytes are seen, its artifact.
 * Everything is copied.  The same key again is ignored when it names the
 * same bytes.  Errors: TL_INVALID_ARG (the key is not the SHA-256 of the
 * manifest, no target line in it, metadata not a JSON object, the same key
 * with other bytes, a compiler other than the builds added before),
 * TL_TOO_LARGE, TL_NOMEM. */
tl_status tl_bundle_writer_add_build(tl_bundle_writer *w, const char *key, const char *manifest,
                                     const char *metadata, int64_t compile_ms, const void *bytes, size_t n,
                                     tl_error *err);

/* Adds a request key for a build added before: its key is computed from
 * text.  The same text again is ignored.  TL_INVALID_ARG when build is not
 * in the writer or text names another target or compiler. */
tl_status tl_bundle_writer_add_request(tl_bundle_writer *w, const char *text, const char *build,
                                       tl_error *err);

/* Counts so far. */
void tl_bundle_writer_counts(const tl_bundle_writer *w, int *artifacts, int *builds, int *requests);

/* Writes the bundle to path (through path.tmp and a rename, so a reader
 * never sees half a file).  TL_IO, TL_TOO_LARGE, TL_NOMEM. */
tl_status tl_bundle_writer_write(tl_bundle_writer *w, const char *path, tl_error *err);

#endif
