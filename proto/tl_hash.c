/*
 * tl_hash.c - SHA-256 through OpenSSL's EVP interface, hex encoding, and
 * validation of hex ids.  See tl_hash.h.
 */
#include <assert.h>
#include <string.h>
#include <openssl/evp.h>
#include "tl_hash.h"

/* ---- one-shot ------------------------------------------------------------ */

tl_status tl_sha256(const void *data, size_t n, uint8_t out[TL_SHA256_LEN]) {
  assert(data || n == 0);
  unsigned int len = 0;
  static const uint8_t empty[1];
  if (!EVP_Digest(data ? data : empty, n, out, &len, EVP_sha256(), NULL) ||
      len != TL_SHA256_LEN) {
    memset(out, 0, TL_SHA256_LEN);
    return TL_INTERNAL;
  }
  return TL_OK;
}

tl_status tl_sha256_hex(const void *data, size_t n, char out[TL_SHA256_HEX_LEN + 1]) {
  uint8_t md[TL_SHA256_LEN];
  tl_status st = tl_sha256(data, n, md);
  if (st != TL_OK) {
    out[0] = 0;
    return st;
  }
  tl_hex_encode(md, sizeof md, out);
  return TL_OK;
}

/* ---- hex ----------------------------------------------------------------- */

void tl_hex_encode(const uint8_t *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * n] = 0;
}

bool tl_hex_is_sha256(const char *s) {
  if (!s)
    return false;
  for (int i = 0; i < TL_SHA256_HEX_LEN; i++) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false; /* also stops at a NUL before 64 characters */
  }
  return s[TL_SHA256_HEX_LEN] == 0;
}

/* ---- incremental ----------------------------------------------------------- */

tl_status tl_sha256_init(tl_sha256_ctx *ctx) {
  assert(ctx);
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  ctx->impl_ = md;
  ctx->status_ = TL_OK;
  if (!md)
    return ctx->status_ = TL_NOMEM;
  if (!EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
    tl_sha256_discard(ctx);
    return ctx->status_ = TL_INTERNAL;
  }
  return TL_OK;
}

tl_status tl_sha256_update(tl_sha256_ctx *ctx, const void *data, size_t n) {
  assert(ctx && (data || n == 0));
  if (ctx->status_ != TL_OK)
    return ctx->status_;
  assert(ctx->impl_); /* update after final is a broken invariant */
  if (n && !EVP_DigestUpdate(ctx->impl_, data, n))
    ctx->status_ = TL_INTERNAL;
  return ctx->status_;
}

tl_status tl_sha256_final(tl_sha256_ctx *ctx, uint8_t out[TL_SHA256_LEN]) {
  assert(ctx);
  tl_status st = ctx->status_;
  unsigned int len = 0;
  if (st == TL_OK) {
    assert(ctx->impl_);
    if (!EVP_DigestFinal_ex(ctx->impl_, out, &len) || len != TL_SHA256_LEN)
      st = TL_INTERNAL;
  }
  if (st != TL_OK)
    memset(out, 0, TL_SHA256_LEN);
  tl_sha256_discard(ctx);
  ctx->status_ = st;
  return st;
}

tl_status tl_sha256_final_hex(tl_sha256_ctx *ctx, char out[TL_SHA256_HEX_LEN + 1]) {
  uint8_t md[TL_SHA256_LEN];
  tl_status st = tl_sha256_final(ctx, md);
  if (st != TL_OK) {
    out[0] = 0;
    return st;
  }
  tl_hex_encode(md, sizeof md, out);
  return TL_OK;
}

void tl_sha256_discard(tl_sha256_ctx *ctx) {
  if (!ctx)
    return;
  EVP_MD_CTX_free(ctx->impl_); /* accepts NULL */
  ctx->impl_ = NULL;
}
