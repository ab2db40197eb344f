/*
 * tune.c - tuning records shared by the cluster (tlclient.h, "tuning"):
 * their key, recording one on the server (POST /v1/tunings), looking one
 * up (GET /v1/tunings/KEY, kept in the local cache as a note for offline
 * starts), and applying it to a request when tuning is on.  The measuring
 * itself is `tlclient tune` (client/tlclient.c), through the one launch
 * path (client/launch.c).
 *
 * The memo: each client keeps the server's last answers to its lookups,
 * a record or "none recorded" (404), for tuning_ttl_ms (tlclient.h,
 * tl_client_set_tuning_ttl_ms), so that a get with tuning on costs no
 * request for a program and shape class asked before.  At most
 * TL_CLIENT_TUNING_MEMO answers (each at most TUNING_RECORD_MAX bytes);
 * when it is full the one that expires first is replaced.  Forgotten when
 * the server or the tuning changes; a record this client posts replaces
 * its key's answer.  Failures (network, server errors) are never kept.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../proto/tl_hash.h"
#include "../proto/tl_json.h"
#include "internal.h"

#define TUNING_RECORD_MAX 4096 /* bytes of a record (the server's limit, TL_CACHE_NOTE_MAX) */
#define DEVICE_MAX 256         /* bytes of a device description */

/* The shape class of a request's overrides: integers >= 1 rounded up to a power of two. */
static json_t *shape_class(json_t *constants) {
  json_t *out = json_object();
  const char *k;
  json_t *v;
  json_object_foreach(constants, k, v) {
    if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= ((json_int_t)1 << 62)) {
      json_int_t p = 1;
      while (p < json_integer_value(v))
        p <<= 1;
      json_object_set_new(out, k, json_integer(p));
    } else
      json_object_set(out, k, v);
  }
  return out;
}

/* The key, the program's digest and the shape class of req on device. */
static tl_status tuning_parts(const tl_client_request *req, const char *device, char key[65], char program[65],
                              json_t **shape, char **text, tl_error *err) {
  if (!device || !*device || strlen(device) > DEVICE_MAX)
    return tl_error_set(err, TL_INVALID_ARG, "a tuning needs a device description of 1 to %d bytes", DEVICE_MAX);
  char *prog = NULL;
  void *cons = NULL;
  tl_status st = tl_request_canonical(req, &prog, &cons, err);
  if (st != TL_OK)
    return st;
  st = tl_sha256_hex(prog, strlen(prog), program);
  free(prog);
  *shape = shape_class(cons);
  json_decref(cons);
  char *sh = *shape ? tl_json_canonical(*shape) : NULL;
  size_t n = (sh ? strlen(sh) : 0) + strlen(device) + 160;
  char *t = sh ? malloc(n) : NULL;
  if (st == TL_OK && t) {
    snprintf(t, n, "tl-tuning 1\nprogram %s\nshape %s\ndevice %s\n", program, sh, device);
    st = tl_sha256_hex(t, strlen(t), key);
  } else if (st == TL_OK)
    st = tl_error_set(err, TL_NOMEM, "out of memory");
  free(sh);
  if (st == TL_OK && text)
    *text = t;
  else
    free(t);
  if (st != TL_OK) {
    json_decref(*shape);
    *shape = NULL;
  }
  return st;
}

tl_status tl_client_tuning_key(const tl_client_request *req, const char *device, char key[65], char **text,
                               tl_error *err) {
  tl_error_clear(err);
  if (text)
    *text = NULL;
  char program[65];
  json_t *shape = NULL;
  tl_status st = tuning_parts(req, device, key, program, &shape, text, err);
  json_decref(shape);
  return st;
}

/* The local cache's note of a record. */
static void note_name(const char *key, char name[80]) { snprintf(name, 80, "tuning %s", key); }

/* ---- the memo of answers --------------------------------------------------------------------- */

typedef struct tl_tuning_memo {
  char key[65];     /* "" : a free slot */
  char *record;     /* NULL: the server has none */
  int64_t until_ms; /* monotonic; past it the server is asked again */
} tl_tuning_memo;

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tl_tuning_memo_clear(tl_client *c) {
  if (!c->tuning_memo)
    return;
  for (int i = 0; i < TL_CLIENT_TUNING_MEMO; i++)
    free(c->tuning_memo[i].record);
  free(c->tuning_memo);
  c->tuning_memo = NULL;
}

/* The answer kept for key: 1 a record (*record, malloc'd), 0 none recorded, -1 not kept (or expired). */
static int memo_get(tl_client *c, const char *key, char **record) {
  int64_t now = mono_ms();
  for (int i = 0; c->tuning_memo && i < TL_CLIENT_TUNING_MEMO; i++) {
    tl_tuning_memo *m = &c->tuning_memo[i];
    if (strcmp(m->key, key) != 0)
      continue;
    if (now >= m->until_ms)
      return -1;
    if (!m->record)
      return 0;
    return (*record = strdup(m->record)) ? 1 : -1;
  }
  return -1;
}

/* Keeps the server's answer for key (record NULL: none recorded). */
static void memo_put(tl_client *c, const char *key, const char *record) {
  if (c->tuning_ttl_ms <= 0)
    return;
  if (!c->tuning_memo && !(c->tuning_memo = calloc(TL_CLIENT_TUNING_MEMO, sizeof *c->tuning_memo)))
    return;
  tl_tuning_memo *m = c->tuning_memo, *slot = NULL; /* key's own slot, else a free one, else the first to expire */
  for (int i = 0; i < TL_CLIENT_TUNING_MEMO && !slot; i++)
    if (strcmp(m[i].key, key) == 0)
      slot = &m[i];
  for (int i = 0; i < TL_CLIENT_TUNING_MEMO && !slot; i++)
    if (!m[i].key[0])
      slot = &m[i];
  if (!slot) {
    slot = &m[0];
    for (int i = 1; i < TL_CLIENT_TUNING_MEMO; i++)
      if (m[i].until_ms < slot->until_ms)
        slot = &m[i];
  }
  char *copy = record ? strdup(record) : NULL;
  if (record && !copy)
    return;
  free(slot->record);
  snprintf(slot->key, sizeof slot->key, "%s", key);
  slot->record = copy;
  slot->until_ms = mono_ms() + c->tuning_ttl_ms;
}

tl_status tl_client_set_tuning_ttl_ms(tl_client *c, long ms, tl_error *err) {
  tl_error_clear(err);
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_set_tuning_ttl_ms: NULL client");
  if (ms < 0 || ms > TL_CLIENT_TUNING_TTL_MAX_MS)
    return tl_error_set(err, TL_INVALID_ARG, "the tuning answers' time to live is 0 to %ld ms (0: not kept), not %ld",
                        (long)TL_CLIENT_TUNING_TTL_MAX_MS, ms);
  c->tuning_ttl_ms = ms;
  if (!ms)
    tl_tuning_memo_clear(c);
  return TL_OK;
}

tl_status tl_client_tuning_record(tl_client *c, const tl_client_request *req, const char *device,
                                  const tl_client_define *winner, int nwinner, double ms, const char *candidates_json,
                                  tl_error *err) {
  tl_error_clear(err);
  if (!c || (nwinner && !winner) || nwinner < 0 || nwinner > TL_CLIENT_DEFINES_MAX || !(ms >= 0))
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_tuning_record: a missing or bad argument");
  char key[65], program[65];
  json_t *shape = NULL;
  tl_status st = tuning_parts(req, device, key, program, &shape, NULL, err);
  if (st != TL_OK)
    return st;
  json_t *cons = json_object(), *cands = candidates_json ? json_loads(candidates_json, 0, NULL) : json_array();
  for (int i = 0; i < nwinner && st == TL_OK; i++) {
    json_t *v = winner[i].name && winner[i].value ? json_loads(winner[i].value, JSON_DECODE_ANY, NULL) : NULL;
    if (!v || !(json_is_number(v) || json_is_boolean(v)))
      st = tl_error_set(err, TL_INVALID_ARG, "the tuned constant %s: the value must be a number or true/false",
                        winner[i].name ? winner[i].name : "(unnamed)");
    else
      json_object_set(cons, winner[i].name, v);
    json_decref(v);
  }
  if (st == TL_OK && !json_is_array(cands))
    st = tl_error_set(err, TL_INVALID_ARG, "the candidates of a tuning record must be a JSON array");
  char *body = NULL;
  if (st == TL_OK) {
    json_t *rec = json_pack("{s:s, s:s, s:O, s:s, s:O, s:f, s:O}", "key", key, "program", program, "shape", shape,
                            "device", device, "constants", cons, "ms", ms, "candidates", cands);
    body = rec ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII) : NULL;
    json_decref(rec);
    if (!body)
      st = tl_error_set(err, TL_NOMEM, "out of memory");
  }
  json_decref(shape);
  json_decref(cons);
  json_decref(cands);
  if (st != TL_OK)
    return st;
  tl_http_response r;
  st = tl_http_request(c, "POST", "/v1/tunings", body, strlen(body), (size_t)1 << 20, &r, err);
  if (st == TL_OK && r.status != 200) {
    char what[300];
    snprintf(what, sizeof what, "POST %.200s/v1/tunings", c->server);
    st = tl_http_error(&r, what, err);
  }
  tl_http_response_free(&r);
  tl_cache *cache = tl_client_local(c);
  if (st == TL_OK && cache) {
    char name[80];
    note_name(key, name);
    tl_cache_note_set(cache, name, body, NULL);
  }
  if (st == TL_OK)
    memo_put(c, key, body); /* what the server now answers for key */
  free(body);
  return st;
}

tl_status tl_client_tuning_lookup(tl_client *c, const tl_client_request *req, const char *device, char **record,
                                  tl_error *err) {
  tl_error_clear(err);
  if (record)
    *record = NULL;
  if (!c || !record)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_tuning_lookup: NULL argument");
  char key[65];
  tl_status st = tl_client_tuning_key(req, device, key, NULL, err);
  if (st != TL_OK)
    return st;
  char path[128], name[80];
  snprintf(path, sizeof path, "/v1/tunings/%s", key);
  note_name(key, name);
  if (!c->offline) { /* the server's answer, kept from a lookup less than tuning_ttl_ms ago */
    int kept = memo_get(c, key, record);
    if (kept == 1)
      return TL_OK;
    if (kept == 0)
      return tl_error_set(err, TL_NOT_FOUND, "no tuning recorded on %s for this program and shape class on %s (key %s; "
                          "answered less than %ld ms ago)", c->server, device, key, c->tuning_ttl_ms);
  }
  tl_cache *cache = tl_client_local(c);
  tl_http_response r;
  tl_error e;
  /* one try: a server that cannot be reached must not hold every request up through the retries */
  int retries = c->retries;
  c->retries = 0;
  st = c->offline ? tl_error_set(&e, TL_NETWORK, "offline") : tl_http_request(c, "GET", path, NULL, 0, 1 << 20, &r, &e);
  c->retries = retries;
  if (!c->offline) {
    if (st == TL_OK && r.status == 200 && r.body) {
      *record = r.body;
      r.body = NULL;
      if (cache)
        tl_cache_note_set(cache, name, *record, NULL);
      memo_put(c, key, *record);
    } else if (st == TL_OK) {
      if (r.status == 404)
        memo_put(c, key, NULL);
      char what[400];
      snprintf(what, sizeof what, "GET %.200s%.100s", c->server, path);
      st = r.status == 404 ? tl_error_set(&e, TL_NOT_FOUND, "no tuning recorded on %s for this program and shape "
                                                             "class on %s (key %s)", c->server, device, key)
                           : tl_http_error(&r, what, &e);
    }
    tl_http_response_free(&r);
  }
  if (st == TL_NETWORK || st == TL_BUSY) { /* the record kept here, if any */
    if (cache && tl_cache_note_get(cache, name, record, NULL) == TL_OK)
      return TL_OK;
    tl_error_set(err, st, "%s; and the local cache has no tuning %s", e.message, key);
    return st;
  }
  if (st != TL_OK && err)
    *err = e;
  return st;
}

tl_status tl_client_set_tuning(tl_client *c, const char *device, tl_error *err) {
  tl_error_clear(err);
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_set_tuning: NULL client");
  if (device && (!*device || strlen(device) > DEVICE_MAX))
    return tl_error_set(err, TL_INVALID_ARG, "a tuning device is 1 to %d bytes, or \"auto\"", DEVICE_MAX);
  char *copy = device ? strdup(device) : NULL;
  if (device && !copy)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  free(c->tuning);
  c->tuning = copy;
  tl_tuning_memo_clear(c); /* set again: every record is asked for anew */
  return TL_OK;
}

/* ---- applying a record ------------------------------------------------------------------- */

void tl_tuned_free(tl_tuned *t) {
  for (int i = 0; i < t->n; i++) {
    free(t->names[i]);
    free(t->values[i]);
  }
  free(t->defs);
  free(t->names);
  free(t->values);
  memset(t, 0, sizeof *t);
}

bool tl_tuning_apply(tl_client *c, const tl_client_request *req, const char *device, tl_tuned *t) {
  memset(t, 0, sizeof *t);
  if (!device || c->tuning_applied)
    return false;
  char *rec = NULL;
  tl_error e;
  if (tl_client_tuning_lookup(c, req, device, &rec, &e) != TL_OK) {
    tl_clog(c, "tuning: %s; the request goes on as it is", e.message);
    return false;
  }
  json_t *doc = json_loads(rec, 0, NULL), *cons = json_object_get(doc, "constants");
  free(rec);
  int have = req->ndefines, extra = json_is_object(cons) ? (int)json_object_size(cons) : 0;
  if (!extra || have + extra > TL_CLIENT_DEFINES_MAX) {
    json_decref(doc);
    return false;
  }
  t->defs = calloc((size_t)(have + extra), sizeof *t->defs);
  t->names = calloc((size_t)extra, sizeof *t->names);
  t->values = calloc((size_t)extra, sizeof *t->values);
  if (!t->defs || !t->names || !t->values) {
    json_decref(doc);
    tl_tuned_free(t);
    return false;
  }
  for (int i = 0; i < have; i++)
    t->defs[i] = req->defines[i];
  int n = have;
  const char *k;
  json_t *v;
  json_object_foreach(cons, k, v) {
    bool given = false; /* the request's own override wins */
    for (int i = 0; i < have; i++)
      given |= strcmp(req->defines[i].name, k) == 0;
    if (given || !(json_is_number(v) || json_is_boolean(v)))
      continue;
    t->names[t->n] = strdup(k);
    t->values[t->n] = json_dumps(v, JSON_ENCODE_ANY);
    if (!t->names[t->n] || !t->values[t->n]) {
      t->n++;
      json_decref(doc);
      tl_tuned_free(t);
      return false;
    }
    t->defs[n++] = (tl_client_define){t->names[t->n], t->values[t->n]};
    t->n++;
  }
  json_decref(doc);
  t->req = *req;
  t->req.defines = t->defs;
  t->req.ndefines = n;
  tl_clog(c, "tuning: the record for %s on %s adds %d constant%s", req->name ? req->name : "the program", device,
          t->n, t->n == 1 ? "" : "s");
  return true;
}
