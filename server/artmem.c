/*
 * artmem.c - verified artifacts kept in memory, with their ready answers.
 *
 * GET /v1/artifacts/{id} is the hot path of a warm cluster: thousands of
 * ranks fetch the same few binaries.  Reading them from SQLite and
 * re-hashing them every time (what libtlcache guarantees for each read)
 * costs far more than sending them, so the bytes of an artifact that was
 * read and checked once are kept here, inside a libmicrohttpd response
 * object that every connection asking for it shares (libmicrohttpd counts
 * its users).  Artifacts are immutable, so this is never wrong about the
 * bytes; what it could miss is an eviction or a corruption in the database,
 * so an entry older than the TTL is dropped and the next GET reads the
 * database again (which also records the use there for LRU eviction).
 *
 * The table is a hash map on the id plus an LRU list, under one mutex held
 * only for pointer updates.  An entry is reference counted: the table holds
 * one reference and every GET that borrowed it one more, so eviction never
 * frees bytes a request is still using.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>
#include "server.h"

#define NBUCKETS 1024

typedef struct ent {
  char id[65];
  const void *bytes;
  size_t n;
  struct MHD_Response *resp; /* owns the bytes (freed by its callback) */
  int64_t loaded_us;
  atomic_int refs;
  bool in_table;
  struct ent *hnext;         /* hash chain */
  struct ent *prev, *next;   /* LRU list, most recent first */
} ent;

struct tl_srv_artmem {
  pthread_mutex_t mu;
  int64_t max_bytes, bytes, entries;
  int64_t ttl_us;
  ent *buckets[NBUCKETS];
  ent *head, *tail;
};

void tl_srv_artifact_headers(struct MHD_Response *r, const char *id) {
  char etag[70];
  snprintf(etag, sizeof etag, "\"%s\"", id);
  MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "public, max-age=31536000, immutable");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
  MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
}

static unsigned bucket_of(const char *id) {
  /* ids are SHA-256 hex: the first characters are already uniform */
  unsigned h = 0;
  for (int i = 0; i < 8; i++)
    h = h * 16 + (unsigned)(id[i] <= '9' ? id[i] - '0' : id[i] - 'a' + 10);
  return h % NBUCKETS;
}

tl_srv_artmem *tl_srv_artmem_new(int64_t max_bytes, double ttl_s) {
  tl_srv_artmem *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  pthread_mutex_init(&m->mu, NULL);
  m->max_bytes = max_bytes;
  m->ttl_us = (int64_t)(ttl_s * 1e6);
  return m;
}

static void ent_unref(ent *e) {
  if (atomic_fetch_sub(&e->refs, 1) == 1) {
    MHD_destroy_response(e->resp); /* frees the bytes once no connection sends them */
    free(e);
  }
}

/* Unlinks e from the table and the list (mu held); the caller drops the
 * table's reference after unlocking. */
static void unlink_ent(tl_srv_artmem *m, ent *e) {
  ent **pp = &m->buckets[bucket_of(e->id)];
  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  if (e->prev)
    e->prev->next = e->next;
  else
    m->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    m->tail = e->prev;
  e->in_table = false;
  m->bytes -= (int64_t)e->n;
  m->entries--;
}

static void push_front(tl_srv_artmem *m, ent *e) {
  e->prev = NULL;
  e->next = m->head;
  if (m->head)
    m->head->prev = e;
  m->head = e;
  if (!m->tail)
    m->tail = e;
}

static void fill_ref(ent *e, tl_srv_artref *out) {
  out->bytes = e->bytes;
  out->n = e->n;
  out->full = e->resp;
  out->entry_ = e;
}

bool tl_srv_artmem_get(tl_srv_artmem *m, const char *id, tl_srv_artref *out) {
  memset(out, 0, sizeof *out);
  int64_t now = tl_srv_now_us();
  ent *stale = NULL;
  pthread_mutex_lock(&m->mu);
  ent *e = m->buckets[bucket_of(id)];
  while (e && memcmp(e->id, id, 64) != 0)
    e = e->hnext;
  if (e && now - e->loaded_us > m->ttl_us) {
    unlink_ent(m, e);
    stale = e;
    e = NULL;
  } else if (e) {
    if (m->head != e) { /* move to the front */
      e->prev->next = e->next;
      if (e->next)
        e->next->prev = e->prev;
      else
        m->tail = e->prev;
      push_front(m, e);
    }
    atomic_fetch_add(&e->refs, 1);
    fill_ref(e, out);
  }
  pthread_mutex_unlock(&m->mu);
  if (stale)
    ent_unref(stale);
  return e != NULL;
}

static void free_bytes(void *cls) { free(cls); }

bool tl_srv_artmem_put(tl_srv_artmem *m, const char *id, void *bytes, size_t n,
                       tl_srv_artref *out) {
  memset(out, 0, sizeof *out);
  ent *e = calloc(1, sizeof *e);
  if (!e) {
    free(bytes);
    return false;
  }
  e->resp = MHD_create_response_from_buffer_with_free_callback_cls(n, bytes, free_bytes, bytes);
  if (!e->resp) {
    free(bytes);
    free(e);
    return false;
  }
  tl_srv_artifact_headers(e->resp, id);
  memcpy(e->id, id, 64);
  e->bytes = bytes;
  e->n = n;
  e->loaded_us = tl_srv_now_us();
  atomic_init(&e->refs, 1); /* the caller's */
  fill_ref(e, out);

  if (m->max_bytes <= 0 || (int64_t)n > m->max_bytes / 4)
    return true; /* served once, not kept */

  ent *drop[64];
  int ndrop = 0;
  pthread_mutex_lock(&m->mu);
  unsigned b = bucket_of(id);
  ent *old = m->buckets[b];
  while (old && memcmp(old->id, id, 64) != 0)
    old = old->hnext;
  if (old) { /* another request loaded it meanwhile: replace it */
    unlink_ent(m, old);
    drop[ndrop++] = old;
  }
  while (m->bytes + (int64_t)n > m->max_bytes && m->tail && ndrop < 64) {
    ent *t = m->tail;
    unlink_ent(m, t);
    drop[ndrop++] = t;
  }
  if (m->bytes + (int64_t)n <= m->max_bytes) {
    atomic_fetch_add(&e->refs, 1); /* the table's */
    e->in_table = true;
    e->hnext = m->buckets[b];
    m->buckets[b] = e;
    push_front(m, e);
    m->bytes += (int64_t)n;
    m->entries++;
  }
  pthread_mutex_unlock(&m->mu);
  for (int i = 0; i < ndrop; i++)
    ent_unref(drop[i]);
  return true;
}

void tl_srv_artref_release(tl_srv_artref *r) {
  if (r->entry_)
    ent_unref(r->entry_);
  memset(r, 0, sizeof *r);
}

void tl_srv_artmem_stats(tl_srv_artmem *m, int64_t *bytes, int64_t *entries) {
  pthread_mutex_lock(&m->mu);
  *bytes = m->bytes;
  *entries = m->entries;
  pthread_mutex_unlock(&m->mu);
}

void tl_srv_artmem_free(tl_srv_artmem *m) {
  if (!m)
    return;
  ent *e = m->head;
  while (e) {
    ent *next = e->next;
    ent_unref(e);
    e = next;
  }
  pthread_mutex_destroy(&m->mu);
  free(m);
}
