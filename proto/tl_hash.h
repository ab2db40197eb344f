/*
 * tl_hash.h - SHA-256 for build keys and artifact ids (docs/DESIGN.md section 4).
 *
 * Build keys and artifact ids are SHA-256 digests written as 64 lowercase
 * hexadecimal characters.  The digest itself comes from OpenSSL's libcrypto
 * (EVP interface), never from hand-written code; this header only gives it
 * the project's shape: one-shot and incremental hashing, hex output, and a
 * validator for ids that arrive from the network.  Link with -lcrypto.
 *
 * Failure: libcrypto can only fail here when it cannot allocate (TL_NOMEM)
 * or is broken (TL_INTERNAL); the functions then return that status and
 * leave the output as an empty string / zero bytes.  Bad input (NULL with
 * n > 0) is a broken invariant and asserts.
 */
#ifndef TL_HASH_H
#define TL_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tl_status.h"

#define TL_SHA256_LEN 32      /* bytes of a digest */
#define TL_SHA256_HEX_LEN 64  /* characters of its hex form, without the NUL */

/* out = SHA-256(data[0..n)).  data may be NULL when n == 0. */
tl_status tl_sha256(const void *data, size_t n, uint8_t out[TL_SHA256_LEN]);

/* out = lowercase hex SHA-256(data[0..n)), NUL-terminated (65 bytes). */
tl_status tl_sha256_hex(const void *data, size_t n, char out[TL_SHA256_HEX_LEN + 1]);

/* Writes the lowercase hex form of bytes[0..n) to out (2n + 1 bytes, NUL-terminated). */
void tl_hex_encode(const uint8_t *bytes, size_t n, char *out);

/* True when s is exactly 64 lowercase hexadecimal characters (then the NUL).
 * Ids and keys coming from outside are validated with this before use.
 * NULL gives false. */
bool tl_hex_is_sha256(const char *s);

/* ---- incremental hashing ------------------------------------------------
 * A tl_sha256_ctx may live on the stack.  Usage:
 *
 *   tl_sha256_ctx h;
 *   if (tl_sha256_init(&h) != TL_OK) ...;
 *   tl_sha256_update(&h, part1, n1); tl_sha256_update(&h, part2, n2);
 *   char hex[65]; tl_sha256_final_hex(&h, hex);
 *
 * init acquires a libcrypto context; final and final_hex release it (also
 * when they fail).  A hash given up half-way is released with
 * tl_sha256_discard, which is also safe after final and on a context whose
 * init failed.  update after a failure returns that failure again. */
typedef struct tl_sha256_ctx {
  void *impl_; /* EVP_MD_CTX *; NULL when released. Private. */
  tl_status status_;
} tl_sha256_ctx;

tl_status tl_sha256_init(tl_sha256_ctx *ctx);
tl_status tl_sha256_update(tl_sha256_ctx *ctx, const void *data, size_t n);
tl_status tl_sha256_final(tl_sha256_ctx *ctx, uint8_t out[TL_SHA256_LEN]);
tl_status tl_sha256_final_hex(tl_sha256_ctx *ctx, char out[TL_SHA256_HEX_LEN + 1]);
void tl_sha256_discard(tl_sha256_ctx *ctx);

#endif
