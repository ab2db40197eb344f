/*
 * tier.c - the shared cache tier on Redis: the second level behind each
 * replica's SQLite cache, and single-flight across replicas (docs/DESIGN.md
 * section 4; README "Clusters").
 *
 * Keys in Redis (KEY is a build key, 64 hex characters):
 *   tl:b:KEY   the build: one string, a header line and four parts,
 *                "TLT1 ARTIFACT SUM COMPILE_MS TLEN MLEN DLEN NBYTES\n"
 *                TARGET MANIFEST METADATA BYTES
 *              where ARTIFACT is the SHA-256 of BYTES and SUM the SHA-256
 *              of TARGET, MANIFEST and METADATA.  Every read re-hashes
 *              all three (KEY is the SHA-256 of MANIFEST): an entry that
 *              fails is deleted there and counted, and the caller builds
 *              it again; nothing read from Redis is served unchecked.
 *              Written with PX --tier-ttl when a TTL is set; entries over
 *              --tier-max-entry bytes are not written (they stay local).
 *   tl:l:KEY   the lease: SET NX PX --tier-lease to a token naming the
 *              replica; the holder's renewer thread extends it every third
 *              of the lease while the compile runs (compare-and-PEXPIRE in
 *              Lua), and the holder deletes it when done (compare-and-DEL).
 *   tl:a:ID    the key of a build whose artifact is ID (same TTL), so that
 *              GET /v1/artifacts/ID on a replica that lacks it finds it.
 *   tl:c:KEY   the channel: the holder PUBLISHes "1" once the build is in
 *              (or "0" when its compile failed), waking the waiters.
 *
 * tl_srv_tier_acquire after a local miss: GET the build (a hit ends it);
 * else SET NX the lease (taken: the caller compiles and calls
 * tl_srv_tier_publish); else wait: SUBSCRIBE to the channel, then loop
 * GET, SET NX (a lease that expired because its holder died is taken over),
 * wait for a message or TL_TIER_POLL_MS (the polling fallback), until the
 * wait bound; past it the caller compiles without a lease.
 *
 * Sharding: every URL is a primary; a key goes to the primary that owns the
 * first point at or after the key's hash on a ring of TL_TIER_VNODES points
 * per primary (consistent hashing: adding a primary moves about 1/N of the
 * keys).  redis-sentinel://HOST:PORT/NAME asks that Sentinel for NAME's
 * primary at every (re)connect, so a failover is followed.
 *
 * Passwords (--tier-auth-file, --tier-sentinel-auth-file): "PASSWORD" or
 * "USER PASSWORD" (Redis 6 ACLs), sent with AUTH right after every connect,
 * to the primaries (also those a Sentinel names) and to the Sentinels; read
 * once at start from files that only their owner may read, kept here only,
 * wiped at the end.  A refused password is a failure of the tier like any
 * other (the replica degrades; /readyz shows Redis's answer, never the
 * password).
 *
 * Degrades, never fails: every call has --tier-timeout as its connect,
 * send and receive time-out; a failed call drops the connection, counts an
 * error, marks the primary down for TL_TIER_RETRY_MS (no call is tried
 * until then) and answers as a miss.  The caller then compiles locally.
 *
 * Threads: a tl_srv_tier is shared; a tl_srv_tier_conn (one connection per
 * primary) belongs to one thread.  The renewer thread has its own.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include "server.h"
#include "../proto/tl_hash.h"

#define TL_TIER_VNODES 160     /* ring points per primary */
#define TL_TIER_RETRY_MS 1000  /* a primary that failed is not called again for this long */
#define TL_TIER_POLL_MS 250    /* a waiter re-checks this often without a message */
#define TL_TIER_HEADER_MAX 256 /* bytes of an entry's header line */
#define TL_TIER_CRED_MAX 512   /* bytes of a password file (user, space, password) */

/* The AUTH of one kind of server (the primaries, the Sentinels). */
typedef struct cred {
  bool set;
  char user[TL_TIER_CRED_MAX + 1]; /* "": the default user */
  char pass[TL_TIER_CRED_MAX + 1];
} cred;

typedef struct shard {
  char url[TL_SRV_TIER_URL_MAX];
  char host[TL_SRV_HOST_MAX];
  int port, db;
  char sentinel[TL_SRV_TIER_URL_MAX]; /* the primary's name under Sentinel, or "" */
  atomic_llong down_until_us;
  atomic_bool up;
  pthread_mutex_t mu; /* last_error */
  char last_error[640];
} shard;

typedef struct point {
  uint64_t h;
  int shard;
} point;

typedef struct lease_rec {
  int shard;
  char key[65];
  char token[64];
  struct lease_rec *next;
} lease_rec;

struct tl_srv_tier {
  tl_srv_tier_opts o;
  cred primary_auth, sentinel_auth;
  shard shards[TL_SRV_TIER_MAX];
  int nshards;
  point *ring;
  int nring;
  char id[40];          /* this replica: host name and pid */
  atomic_llong seq;     /* lease tokens */
  pthread_mutex_t lmu;
  pthread_cond_t lcv;
  lease_rec *held;
  bool stop;
  pthread_t renewer;
  bool renewer_started;
};

struct tl_srv_tier_conn {
  tl_srv_tier *t;
  redisContext *c[TL_SRV_TIER_MAX];
};

#define ADD(field, v) atomic_fetch_add_explicit(&(field), (v), memory_order_relaxed)

static const char renew_lua[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
    "else return 0 end";
static const char release_lua[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

/* ==== URLs and the ring ========================================================= */

static tl_status parse_url(const char *url, shard *s, tl_error *err) {
  const char *rest;
  bool sentinel = false;
  if (strncmp(url, "redis://", 8) == 0)
    rest = url + 8;
  else if (strncmp(url, "redis-sentinel://", 17) == 0)
    rest = url + 17, sentinel = true;
  else
    return tl_error_set(err, TL_INVALID_ARG,
                        "--tier: '%s' is not redis://HOST:PORT[/DB] or "
                        "redis-sentinel://HOST:PORT/NAME",
                        url);
  if (strlen(url) >= sizeof s->url)
    return tl_error_set(err, TL_TOO_LARGE, "--tier: '%s' is longer than %d bytes", url,
                        TL_SRV_TIER_URL_MAX - 1);
  if (strchr(rest, '@')) /* not echoed: it may hold a password */
    return tl_error_set(err, TL_INVALID_ARG,
                        "--tier: a URL with user or password (USER:PASSWORD@) is refused: a command "
                        "line is readable by every user of the machine; give the password in a file "
                        "with --tier-auth-file (--tier-sentinel-auth-file for a Sentinel's)");
  snprintf(s->url, sizeof s->url, "%s", url);
  char hostport[TL_SRV_TIER_URL_MAX];
  const char *slash = strchr(rest, '/');
  size_t hl = slash ? (size_t)(slash - rest) : strlen(rest);
  memcpy(hostport, rest, hl);
  hostport[hl] = 0;
  if (!hl || !strchr(hostport, ':') || hostport[0] == ':' ||
      !tl_srv_parse_listen(hostport, s->host, &s->port) || s->port == 0)
    return tl_error_set(err, TL_INVALID_ARG, "--tier: '%s' needs HOST:PORT with a port from 1 to 65535",
                        url);
  s->db = 0;
  s->sentinel[0] = 0;
  if (sentinel) {
    if (!slash || !slash[1] || strlen(slash + 1) >= sizeof s->sentinel || strchr(slash + 1, '/'))
      return tl_error_set(err, TL_INVALID_ARG, "--tier: '%s' needs the primary's name after the port",
                          url);
    snprintf(s->sentinel, sizeof s->sentinel, "%s", slash + 1);
  } else if (slash && slash[1] && !tl_srv_parse_int(slash + 1, 0, 15, &s->db)) {
    return tl_error_set(err, TL_INVALID_ARG, "--tier: '%s': the database is a number from 0 to 15",
                        url);
  }
  return TL_OK;
}

static uint64_t hash64(const void *p, size_t n) {
  uint8_t d[TL_SHA256_LEN] = {0};
  tl_sha256(p, n, d);
  uint64_t h = 0;
  for (int i = 0; i < 8; i++)
    h = h << 8 | d[i];
  return h;
}

static int cmp_point(const void *a, const void *b) {
  const point *x = a, *y = b;
  return x->h < y->h ? -1 : x->h > y->h;
}

static int shard_of(const tl_srv_tier *t, const char *key) {
  uint64_t h = 0;
  for (int i = 0; i < 16; i++)
    h = h << 4 | (uint64_t)(key[i] <= '9' ? key[i] - '0' : key[i] - 'a' + 10);
  int lo = 0, hi = t->nring; /* first point >= h, wrapping */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->ring[mid].h < h)
      lo = mid + 1;
    else
      hi = mid;
  }
  return t->ring[lo == t->nring ? 0 : lo].shard;
}

int tl_srv_tier_shard_of(const tl_srv_tier *t, const char *key) { return shard_of(t, key); }

/* ==== connections ================================================================ */

static struct timeval tv_of(double s) {
  struct timeval tv = {(time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6)};
  return tv;
}

static void note_error(tl_srv_tier *t, int sh, const char *what, const char *msg) {
  shard *s = &t->shards[sh];
  ADD(t->o.metrics->tier_errors, 1);
  atomic_store(&s->up, false);
  atomic_store(&s->down_until_us, tl_srv_now_us() + (long long)TL_TIER_RETRY_MS * 1000);
  bool noauth = strncmp(msg, "NOAUTH", 6) == 0;
  pthread_mutex_lock(&s->mu);
  snprintf(s->last_error, sizeof s->last_error, "%s: %s%s", what, msg,
           noauth ? " (the primary wants a password: --tier-auth-file)" : "");
  pthread_mutex_unlock(&s->mu);
}

/* Reads a password file: one line, PASSWORD or USER PASSWORD. */
static tl_status read_cred(const char *path, const char *flag, cred *c, tl_error *err) {
  char *buf;
  size_t n;
  char what[64];
  snprintf(what, sizeof what, "%s file", flag);
  tl_status st = tl_srv_secret_read(path, what, "password is a secret", TL_TIER_CRED_MAX + 2, &buf, &n, err);
  if (st != TL_OK)
    return st;
  size_t len = n;
  if (len && buf[len - 1] == '\n')
    len--;
  if (len && buf[len - 1] == '\r')
    len--;
  bool ok = len > 0 && len <= TL_TIER_CRED_MAX && buf[0] != ' ';
  for (size_t i = 0; i < len && ok; i++)
    ok = (unsigned char)buf[i] >= 0x20 && buf[i] != 0x7f;
  const char *sp = ok ? memchr(buf, ' ', len) : NULL;
  if (ok && sp && (size_t)(sp - buf) + 1 == len)
    ok = false; /* "USER " with no password */
  if (!ok) {
    tl_srv_secret_free(buf, n);
    return tl_error_set(err, TL_INVALID_ARG,
                        "%s '%s': it must hold one line of 1 to %d printable bytes, PASSWORD or USER PASSWORD",
                        flag, path, TL_TIER_CRED_MAX);
  }
  c->set = true;
  if (sp) {
    memcpy(c->user, buf, (size_t)(sp - buf));
    c->user[sp - buf] = 0;
    memcpy(c->pass, sp + 1, len - (size_t)(sp - buf) - 1);
    c->pass[len - (size_t)(sp - buf) - 1] = 0;
  } else {
    memcpy(c->pass, buf, len);
    c->pass[len] = 0;
  }
  tl_srv_secret_free(buf, n);
  return TL_OK;
}

/* AUTH on a fresh connection when cr is set; false with msg set when refused. */
static bool authenticate(redisContext *c, const cred *cr, const char *who, const char *host, int port,
                         char *msg, size_t mn) {
  if (!cr->set)
    return true;
  redisReply *r = cr->user[0] ? redisCommand(c, "AUTH %s %s", cr->user, cr->pass) : redisCommand(c, "AUTH %s", cr->pass);
  bool ok = r && r->type == REDIS_REPLY_STATUS;
  if (!ok)
    snprintf(msg, mn, "%s at %.100s:%d refused the password%s%.64s: %.300s", who, host, port, cr->user[0] ? " of user " : "",
             cr->user, r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
  freeReplyObject(r);
  return ok;
}

/* A connected context to host:port with the time-outs set, or NULL (msg says why). */
static redisContext *dial(const tl_srv_tier *t, const char *host, int port, char *msg, size_t mn) {
  redisContext *c = redisConnectWithTimeout(host, port, tv_of(t->o.timeout_s));
  if (!c || c->err || redisSetTimeout(c, tv_of(t->o.timeout_s)) != REDIS_OK) {
    snprintf(msg, mn, "%s:%d: %s", host, port, c ? c->errstr : "out of memory");
    redisFree(c);
    return NULL;
  }
  return c;
}

/* Opens a connection to primary sh (through its Sentinel when it has one)
 * and selects its database.  NULL on failure (noted). */
static redisContext *open_shard(tl_srv_tier *t, int sh) {
  shard *s = &t->shards[sh];
  char msg[600];
  char host[TL_SRV_HOST_MAX];
  int port = s->port;
  snprintf(host, sizeof host, "%s", s->host);
  if (s->sentinel[0]) {
    redisContext *q = dial(t, s->host, s->port, msg, sizeof msg);
    if (!q) {
      note_error(t, sh, "sentinel", msg);
      return NULL;
    }
    if (!authenticate(q, &t->sentinel_auth, "the Sentinel", s->host, s->port, msg, sizeof msg)) {
      redisFree(q);
      note_error(t, sh, "sentinel auth", msg);
      return NULL;
    }
    redisReply *r = redisCommand(q, "SENTINEL get-master-addr-by-name %s", s->sentinel);
    bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
              r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
              r->element[0]->len < sizeof host && tl_srv_parse_int(r->element[1]->str, 1, 65535, &port);
    if (ok)
      snprintf(host, sizeof host, "%s", r->element[0]->str);
    else if (r && r->type == REDIS_REPLY_ERROR)
      snprintf(msg, sizeof msg, "the Sentinel at %s:%d refused: %s%s", s->host, s->port, r->str,
               strncmp(r->str, "NOAUTH", 6) == 0 ? " (it wants a password: --tier-sentinel-auth-file)" : "");
    else
      snprintf(msg, sizeof msg, "the Sentinel at %s:%d does not know the primary '%s'%s%s", s->host,
               s->port, s->sentinel, q->err ? ": " : "", q->err ? q->errstr : "");
    freeReplyObject(r);
    redisFree(q);
    if (!ok) {
      note_error(t, sh, "sentinel", msg);
      return NULL;
    }
  }
  redisContext *c = dial(t, host, port, msg, sizeof msg);
  if (!c) {
    note_error(t, sh, "connect", msg);
    return NULL;
  }
  if (!authenticate(c, &t->primary_auth, "the primary", host, port, msg, sizeof msg)) {
    redisFree(c);
    note_error(t, sh, "auth", msg);
    return NULL;
  }
  if (s->db != 0 || s->sentinel[0]) {
    /* SELECT, or under Sentinel also ROLE: a primary that was demoted
     * (and not yet reconfigured) must not take writes */
    redisReply *r = s->db ? redisCommand(c, "SELECT %d", s->db) : redisCommand(c, "ROLE");
    bool ok = r && (s->db ? r->type == REDIS_REPLY_STATUS
                          : r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                                r->element[0]->type == REDIS_REPLY_STRING &&
                                strcmp(r->element[0]->str, "master") == 0);
    if (!ok) /* Redis's answer (NOAUTH: no password given), or what failed */
      snprintf(msg, sizeof msg, "%s", r && r->type == REDIS_REPLY_ERROR ? r->str
                                      : c->err                          ? c->errstr
                                      : s->db                           ? "refused"
                                                                        : "not a primary (demoted?)");
    freeReplyObject(r);
    if (!ok) {
      note_error(t, sh, s->db ? "select" : "role", msg);
      redisFree(c);
      return NULL;
    }
  }
  return c;
}

/* Runs one command on primary sh.  NULL when the primary is down or the
 * call failed (the connection is dropped and the failure noted); an error
 * reply is a failure too.  A kept connection that turns out closed (Redis
 * restarted since) is replaced once at once, without a failure. */
static redisReply *call(tl_srv_tier_conn *tc, int sh, int argc, const char **argv,
                        const size_t *len) {
  tl_srv_tier *t = tc->t;
  shard *s = &t->shards[sh];
  for (int attempt = 0;; attempt++) {
    bool fresh = false;
    if (!tc->c[sh]) {
      if (tl_srv_now_us() < atomic_load(&s->down_until_us))
        return NULL;
      if (!(tc->c[sh] = open_shard(t, sh)))
        return NULL;
      fresh = true;
    }
    redisReply *r = redisCommandArgv(tc->c[sh], argc, argv, len);
    if (r && r->type != REDIS_REPLY_ERROR) {
      atomic_store(&s->up, true);
      return r;
    }
    int e = errno;
    bool closed = !r && !fresh && attempt == 0 &&
                  (tc->c[sh]->err == REDIS_ERR_EOF ||
                   (tc->c[sh]->err == REDIS_ERR_IO && e != EAGAIN && e != EWOULDBLOCK));
    if (!closed)
      note_error(t, sh, argv[0], r ? r->str : tc->c[sh]->errstr);
    freeReplyObject(r);
    redisFree(tc->c[sh]);
    tc->c[sh] = NULL;
    if (!closed)
      return NULL;
  }
}

tl_srv_tier_conn *tl_srv_tier_conn_new(tl_srv_tier *t) {
  tl_srv_tier_conn *c = calloc(1, sizeof *c);
  if (c)
    c->t = t;
  return c;
}

void tl_srv_tier_conn_free(tl_srv_tier_conn *c) {
  if (!c)
    return;
  for (int i = 0; i < TL_SRV_TIER_MAX; i++)
    redisFree(c->c[i]);
  free(c);
}

/* ==== entries ===================================================================== */

static void name_of(char out[70], const char *prefix, const char *key) {
  snprintf(out, 70, "%s%.64s", prefix, key);
}

static void sum_parts(const char *target, const char *manifest, const char *meta, char out[65]) {
  tl_sha256_ctx h;
  out[0] = 0;
  if (tl_sha256_init(&h) != TL_OK)
    return;
  tl_sha256_update(&h, target, strlen(target) + 1);
  tl_sha256_update(&h, manifest, strlen(manifest) + 1);
  tl_sha256_update(&h, meta, strlen(meta));
  tl_sha256_final_hex(&h, out);
}

/* Decodes and checks an entry of key.  On success *out is one allocation
 * (tl_cache_build_free) and *bytes a malloc'd copy.  False when the entry
 * is malformed or fails a hash. */
static bool decode(const char *key, const char *v, size_t n, tl_cache_build **out, void **bytes,
                   size_t *nbytes) {
  const char *nl = memchr(v, '\n', n < TL_TIER_HEADER_MAX ? n : TL_TIER_HEADER_MAX);
  if (!nl)
    return false;
  char head[TL_TIER_HEADER_MAX + 1];
  memcpy(head, v, (size_t)(nl - v));
  head[nl - v] = 0;
  char art[65], sum[65];
  long long ms, tl, ml, dl, bl;
  int used = 0;
  if (sscanf(head, "TLT1 %64s %64s %lld %lld %lld %lld %lld%n", art, sum, &ms, &tl, &ml, &dl, &bl,
             &used) != 7 ||
      head[used] || !tl_hex_is_sha256(art) || !tl_hex_is_sha256(sum) || ms < 0 || tl < 1 ||
      tl > TL_CACHE_TARGET_MAX || ml < 0 || ml > (long long)TL_CACHE_TEXT_MAX || dl < 0 ||
      dl > (long long)TL_CACHE_TEXT_MAX || bl < 1 || bl > (long long)n)
    return false;
  size_t off = (size_t)(nl - v) + 1;
  if ((unsigned long long)(n - off) != (unsigned long long)(tl + ml + dl + bl))
    return false;
  const char *p = v + off;
  tl_cache_build *b = malloc(sizeof *b + (size_t)(tl + ml + dl) + 3);
  void *copy = malloc((size_t)bl);
  if (!b || !copy) {
    free(b);
    free(copy);
    return false;
  }
  char *s = (char *)(b + 1);
  memset(b, 0, sizeof *b);
  memcpy(s, p, (size_t)tl), s[tl] = 0, b->target = s, s += tl + 1, p += tl;
  memcpy(s, p, (size_t)ml), s[ml] = 0, b->manifest = s, s += ml + 1, p += ml;
  memcpy(s, p, (size_t)dl), s[dl] = 0, b->metadata = s, p += dl;
  memcpy(copy, p, (size_t)bl);
  char h[65], hs[65], hk[65];
  sum_parts(b->target, b->manifest, b->metadata, hs);
  bool ok = tl_sha256_hex(copy, (size_t)bl, h) == TL_OK && strcmp(h, art) == 0 &&
            strcmp(hs, sum) == 0 && strlen(b->target) == (size_t)tl &&
            strlen(b->manifest) == (size_t)ml && strlen(b->metadata) == (size_t)dl &&
            /* a build key is the SHA-256 of its manifest */
            tl_sha256_hex(b->manifest, (size_t)ml, hk) == TL_OK && memcmp(hk, key, 64) == 0;
  if (!ok) {
    free(b);
    free(copy);
    return false;
  }
  memcpy(b->key, key, 64);
  b->key[64] = 0;
  memcpy(b->artifact_id, art, 65);
  b->compile_ms = ms;
  b->size = bl;
  *out = b;
  *bytes = copy;
  *nbytes = (size_t)bl;
  return true;
}

typedef enum { LOOK_HIT, LOOK_MISS, LOOK_DOWN } look;

/* GET of key's entry; a bad entry is deleted there and is a miss. */
static look lookup(tl_srv_tier_conn *tc, int sh, const char *key, tl_cache_build **b, void **bytes,
                   size_t *n) {
  tl_srv_tier *t = tc->t;
  char name[70];
  name_of(name, "tl:b:", key);
  const char *argv[] = {"GET", name};
  redisReply *r = call(tc, sh, 2, argv, NULL);
  if (!r)
    return LOOK_DOWN;
  look res = LOOK_MISS;
  if (r->type == REDIS_REPLY_STRING) {
    if (decode(key, r->str, r->len, b, bytes, n)) {
      res = LOOK_HIT;
    } else {
      ADD(t->o.metrics->tier_corrupt, 1);
      fprintf(stderr, "tlserverd: the tier's entry for %.16s... failed its check; deleted\n", key);
      const char *del[] = {"DEL", name};
      freeReplyObject(call(tc, sh, 2, del, NULL));
    }
  }
  freeReplyObject(r);
  return res;
}

/* ==== leases ===================================================================== */

/* SET NX PX: 1 taken, 0 held by another, -1 the tier failed. */
static int try_lease(tl_srv_tier_conn *tc, int sh, const char *key, tl_srv_tier_lease *l) {
  tl_srv_tier *t = tc->t;
  char name[70], px[24];
  name_of(name, "tl:l:", key);
  snprintf(l->token, sizeof l->token, "%s#%lld", t->id, (long long)ADD(t->seq, 1));
  snprintf(px, sizeof px, "%lld", (long long)(t->o.lease_s * 1000));
  const char *argv[] = {"SET", name, l->token, "NX", "PX", px};
  redisReply *r = call(tc, sh, 6, argv, NULL);
  if (!r)
    return -1;
  int got = r->type == REDIS_REPLY_STATUS;
  freeReplyObject(r);
  if (!got)
    return 0;
  lease_rec *rec = calloc(1, sizeof *rec);
  if (rec) { /* without a record the lease is not renewed: it may expire early, never wrongly */
    rec->shard = sh;
    memcpy(rec->key, key, 65);
    memcpy(rec->token, l->token, sizeof rec->token);
    pthread_mutex_lock(&t->lmu);
    rec->next = t->held;
    t->held = rec;
    pthread_mutex_unlock(&t->lmu);
  }
  l->held = true;
  l->shard = sh;
  memcpy(l->key, key, 65);
  return 1;
}

static void *renewer_main(void *arg) {
  tl_srv_tier *t = arg;
  tl_srv_tier_conn *tc = tl_srv_tier_conn_new(t);
  char px[24];
  snprintf(px, sizeof px, "%lld", (long long)(t->o.lease_s * 1000));
  int64_t period_us = (int64_t)(t->o.lease_s * 1e6 / 3); /* renewals; pings at least every second */
  if (period_us > 1000000)
    period_us = 1000000;
  pthread_mutex_lock(&t->lmu);
  while (!t->stop) {
    /* keeps every primary's up/down state fresh for /readyz and /metrics */
    pthread_mutex_unlock(&t->lmu);
    for (int i = 0; i < t->nshards && tc; i++) {
      const char *ping[] = {"PING"};
      freeReplyObject(call(tc, i, 1, ping, NULL));
    }
    pthread_mutex_lock(&t->lmu);
    if (t->stop)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + period_us * 1000;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&t->lcv, &t->lmu, &ts);
    if (t->stop)
      break;
    int n = 0;
    for (lease_rec *r = t->held; r; r = r->next)
      n++;
    lease_rec *copy = n ? malloc((size_t)n * sizeof *copy) : NULL;
    n = 0;
    for (lease_rec *r = t->held; r && copy; r = r->next)
      copy[n++] = *r;
    pthread_mutex_unlock(&t->lmu);
    for (int i = 0; i < n && tc; i++) {
      char name[70];
      name_of(name, "tl:l:", copy[i].key);
      const char *argv[] = {"EVAL", renew_lua, "1", name, copy[i].token, px};
      freeReplyObject(call(tc, copy[i].shard, 6, argv, NULL));
    }
    free(copy);
    pthread_mutex_lock(&t->lmu);
  }
  pthread_mutex_unlock(&t->lmu);
  tl_srv_tier_conn_free(tc);
  return NULL;
}

static void drop_lease(tl_srv_tier_conn *tc, tl_srv_tier_lease *l) {
  tl_srv_tier *t = tc->t;
  if (!l->held)
    return;
  pthread_mutex_lock(&t->lmu);
  for (lease_rec **pp = &t->held; *pp; pp = &(*pp)->next) {
    if (strcmp((*pp)->token, l->token) == 0) {
      lease_rec *dead = *pp;
      *pp = dead->next;
      free(dead);
      break;
    }
  }
  pthread_mutex_unlock(&t->lmu);
  char name[70];
  name_of(name, "tl:l:", l->key);
  const char *argv[] = {"EVAL", release_lua, "1", name, l->token};
  freeReplyObject(call(tc, l->shard, 5, argv, NULL));
  l->held = false;
}

/* ==== waiting ======================================================================== */

/* A connection subscribed to key's channel on primary sh, or NULL. */
static redisContext *subscribe(tl_srv_tier *t, int sh, const char *key) {
  redisContext *c = open_shard(t, sh);
  if (!c)
    return NULL;
  char name[70];
  name_of(name, "tl:c:", key);
  redisReply *r = redisCommand(c, "SUBSCRIBE %s", name);
  bool ok = r && r->type == REDIS_REPLY_ARRAY;
  freeReplyObject(r);
  if (!ok) {
    note_error(t, sh, "subscribe", c->err ? c->errstr : "refused");
    redisFree(c);
    return NULL;
  }
  return c;
}

/* Waits up to ms for a message on c; false when the connection failed
 * (a time-out without a message is true). */
static bool wait_message(redisContext *c, int ms) {
  void *reply = NULL;
  if (redisGetReplyFromReader(c, &reply) != REDIS_OK)
    return false;
  if (reply) {
    freeReplyObject(reply);
    return true;
  }
  struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
  int n = poll(&pfd, 1, ms);
  if (n < 0)
    return errno == EINTR;
  if (n == 0)
    return true;
  if (redisBufferRead(c) != REDIS_OK)
    return false;
  while (redisGetReplyFromReader(c, &reply) == REDIS_OK && reply) { /* drain */
    freeReplyObject(reply);
    reply = NULL;
  }
  return !c->err;
}

/* try_lease, then look again when it was taken: a holder publishes its build
 * and then releases its lease, so a miss read before the publish and a SET NX
 * after the release would compile the build a second time.  2: the build is
 * there now (*b etc. set, no lease held); else try_lease's answer. */
static int lease_or_hit(tl_srv_tier_conn *tc, int sh, const char *key, tl_srv_tier_lease *l, tl_cache_build **b,
                        void **bytes, size_t *n) {
  int got = try_lease(tc, sh, key, l);
  if (got > 0 && lookup(tc, sh, key, b, bytes, n) == LOOK_HIT) {
    drop_lease(tc, l);
    return 2;
  }
  return got;
}

tl_srv_tier_outcome tl_srv_tier_acquire(tl_srv_tier_conn *tc, const char *key, double wait_s,
                                        const atomic_bool *cancel, tl_srv_tier_lease *l,
                                        tl_cache_build **b, void **bytes, size_t *n) {
  tl_srv_tier *t = tc->t;
  tl_srv_metrics *m = t->o.metrics;
  memset(l, 0, sizeof *l);
  *b = NULL;
  *bytes = NULL;
  *n = 0;
  int sh = shard_of(t, key);
  look lk = lookup(tc, sh, key, b, bytes, n);
  if (lk == LOOK_HIT) {
    ADD(m->tier_hits, 1);
    return TL_TIER_HIT;
  }
  if (lk == LOOK_DOWN)
    return TL_TIER_COMPILE;
  ADD(m->tier_misses, 1);
  int got = lease_or_hit(tc, sh, key, l, b, bytes, n);
  if (got == 2) { /* published between the GET and the SET NX */
    ADD(m->tier_hits, 1);
    return TL_TIER_HIT;
  }
  if (got != 0)
    return TL_TIER_COMPILE; /* ours, or the tier failed: compile */

  /* another replica compiles it: wait for its build */
  ADD(m->tier_lease_waits, 1);
  int64_t deadline = tl_srv_now_us() + (int64_t)(wait_s * 1e6);
  redisContext *sub = subscribe(t, sh, key);
  for (;;) {
    lk = lookup(tc, sh, key, b, bytes, n);
    if (lk == LOOK_HIT) {
      ADD(m->tier_hits, 1);
      break;
    }
    if (lk == LOOK_DOWN)
      break;
    if ((got = lease_or_hit(tc, sh, key, l, b, bytes, n)) == 2) {
      ADD(m->tier_hits, 1);
      break;
    }
    if (got != 0) {
      if (got > 0)
        ADD(m->tier_takeovers, 1); /* the holder died or gave up */
      break;
    }
    int64_t left_ms = (deadline - tl_srv_now_us()) / 1000;
    if (cancel && atomic_load(cancel))
      break; /* shutting down: the caller's compile is cancelled in its turn */
    if (left_ms <= 0) {
      ADD(m->tier_wait_timeouts, 1);
      break;
    }
    int ms = left_ms < TL_TIER_POLL_MS ? (int)left_ms : TL_TIER_POLL_MS;
    if (sub && !wait_message(sub, ms)) {
      redisFree(sub); /* polling only from now on */
      sub = NULL;
    }
    if (!sub)
      usleep((useconds_t)ms * 1000);
  }
  redisFree(sub);
  return *b ? TL_TIER_HIT : TL_TIER_COMPILE;
}

int tl_srv_tier_publish(tl_srv_tier_conn *tc, tl_srv_tier_lease *l, const tl_cache_build *b,
                        const void *bytes, size_t n) {
  tl_srv_tier *t = tc->t;
  int sh = l->held ? l->shard : -1, written = 0;
  char chan[70];
  const char *key = b ? b->key : l->key;
  if (sh < 0) {
    if (!b)
      return 0; /* a failed compile without a lease: nobody waits for it */
    sh = shard_of(t, key);
  }
  if (b) {
    const char *meta = b->metadata ? b->metadata : "{}";
    const char *man = b->manifest ? b->manifest : "";
    char sum[65], head[TL_TIER_HEADER_MAX];
    sum_parts(b->target, man, meta, sum);
    int hl = snprintf(head, sizeof head, "TLT1 %s %s %lld %zu %zu %zu %zu\n", b->artifact_id, sum,
                      (long long)b->compile_ms, strlen(b->target), strlen(man), strlen(meta), n);
    size_t total = (size_t)hl + strlen(b->target) + strlen(man) + strlen(meta) + n;
    written = -1;
    if ((int64_t)total > t->o.max_entry) {
      ADD(t->o.metrics->tier_too_large, 1);
      written = 0;
    } else {
      char *v = malloc(total);
      if (v) {
        char *p = v;
        memcpy(p, head, (size_t)hl), p += hl;
        memcpy(p, b->target, strlen(b->target)), p += strlen(b->target);
        memcpy(p, man, strlen(man)), p += strlen(man);
        memcpy(p, meta, strlen(meta)), p += strlen(meta);
        memcpy(p, bytes, n);
        char name[70], px[24];
        name_of(name, "tl:b:", key);
        snprintf(px, sizeof px, "%lld", (long long)(t->o.ttl_s * 1000));
        const char *argv[] = {"SET", name, v, "PX", px};
        size_t len[] = {3, strlen(name), total, 2, strlen(px)};
        redisReply *r = call(tc, sh, t->o.ttl_s > 0 ? 5 : 3, argv, len);
        if (r) {
          written = 1;
          ADD(t->o.metrics->tier_publishes, 1);
          /* the artifact id's pointer to the key, for GET /v1/artifacts/ID */
          char aname[70];
          name_of(aname, "tl:a:", b->artifact_id);
          const char *av[] = {"SET", aname, key, "PX", px};
          freeReplyObject(call(tc, shard_of(t, b->artifact_id), t->o.ttl_s > 0 ? 5 : 3, av, NULL));
        }
        freeReplyObject(r);
        free(v);
      }
    }
  }
  drop_lease(tc, l);
  name_of(chan, "tl:c:", key);
  const char *argv[] = {"PUBLISH", chan, b ? "1" : "0"};
  freeReplyObject(call(tc, sh, 3, argv, NULL));
  return written;
}

tl_status tl_srv_tier_fetch(tl_srv_tier *t, const char *key, const char *artifact,
                           tl_cache_build **b, void **bytes, size_t *n) {
  *b = NULL;
  *bytes = NULL;
  *n = 0;
  tl_srv_tier_conn *tc = tl_srv_tier_conn_new(t);
  if (!tc)
    return TL_NOMEM;
  char k[65] = "";
  if (key) {
    snprintf(k, sizeof k, "%s", key);
  } else {
    char aname[70];
    name_of(aname, "tl:a:", artifact);
    const char *argv[] = {"GET", aname};
    redisReply *r = call(tc, shard_of(t, artifact), 2, argv, NULL);
    if (r && r->type == REDIS_REPLY_STRING && r->len == 64)
      memcpy(k, r->str, 65);
    freeReplyObject(r);
  }
  tl_status st = TL_NOT_FOUND;
  if (tl_hex_is_sha256(k) && lookup(tc, shard_of(t, k), k, b, bytes, n) == LOOK_HIT) {
    if (artifact && strcmp((*b)->artifact_id, artifact) != 0) { /* a stale pointer */
      tl_cache_build_free(*b);
      free(*bytes);
      *b = NULL;
      *bytes = NULL;
      *n = 0;
    } else {
      ADD(t->o.metrics->tier_hits, 1);
      st = TL_OK;
    }
  }
  tl_srv_tier_conn_free(tc);
  return st;
}

/* ==== small records (tuning) ================================================================ */

tl_status tl_srv_tier_record_set(tl_srv_tier *t, const char *key, const char *value) {
  tl_srv_tier_conn *tc = tl_srv_tier_conn_new(t);
  if (!tc)
    return TL_NOMEM;
  char name[70], px[32];
  name_of(name, "tl:t:", key);
  snprintf(px, sizeof px, "%lld", (long long)(t->o.ttl_s * 1000));
  const char *argv[] = {"SET", name, value, "PX", px};
  redisReply *r = call(tc, shard_of(t, key), t->o.ttl_s > 0 ? 5 : 3, argv, NULL);
  tl_status st = r ? TL_OK : TL_NETWORK;
  freeReplyObject(r);
  tl_srv_tier_conn_free(tc);
  return st;
}

tl_status tl_srv_tier_record_get(tl_srv_tier *t, const char *key, char **value) {
  *value = NULL;
  tl_srv_tier_conn *tc = tl_srv_tier_conn_new(t);
  if (!tc)
    return TL_NOMEM;
  char name[70];
  name_of(name, "tl:t:", key);
  const char *argv[] = {"GET", name};
  redisReply *r = call(tc, shard_of(t, key), 2, argv, NULL);
  tl_status st = !r ? TL_NETWORK : r->type != REDIS_REPLY_STRING ? TL_NOT_FOUND : TL_OK;
  if (st == TL_OK && !(*value = strndup(r->str, r->len)))
    st = TL_NOMEM;
  freeReplyObject(r);
  tl_srv_tier_conn_free(tc);
  return st;
}

/* ==== the tier ======================================================================== */

tl_status tl_srv_tier_new(const tl_srv_tier_opts *o, tl_srv_tier **out, tl_error *err) {
  *out = NULL;
  if (o->nurls < 1 || o->nurls > TL_SRV_TIER_MAX)
    return tl_error_set(err, TL_INVALID_ARG, "--tier: 1 to %d primaries", TL_SRV_TIER_MAX);
  tl_srv_tier *t = calloc(1, sizeof *t);
  if (!t)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  t->o = *o;
  pthread_mutex_init(&t->lmu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->lcv, &ca);
  pthread_condattr_destroy(&ca);
  for (int i = 0; i < o->nurls; i++)
    pthread_mutex_init(&t->shards[i].mu, NULL);
  t->nshards = o->nurls;
  tl_status st = TL_OK;
  for (int i = 0; i < o->nurls && st == TL_OK; i++) {
    st = parse_url(o->urls[i], &t->shards[i], err);
    for (int k = 0; k < i && st == TL_OK; k++)
      if (strcmp(t->shards[k].url, t->shards[i].url) == 0)
        st = tl_error_set(err, TL_INVALID_ARG, "--tier: '%s' is given twice", o->urls[i]);
  }
  if (st == TL_OK && o->auth_file)
    st = read_cred(o->auth_file, "--tier-auth-file", &t->primary_auth, err);
  if (st == TL_OK && o->sentinel_auth_file) {
    bool any = false;
    for (int i = 0; i < t->nshards; i++)
      any |= t->shards[i].sentinel[0] != 0;
    st = any ? read_cred(o->sentinel_auth_file, "--tier-sentinel-auth-file", &t->sentinel_auth, err)
             : tl_error_set(err, TL_INVALID_ARG, "--tier-sentinel-auth-file: no --tier is a redis-sentinel:// URL");
  }
  if (st == TL_OK && !(t->ring = malloc((size_t)o->nurls * TL_TIER_VNODES * sizeof *t->ring)))
    st = tl_error_set(err, TL_NOMEM, "out of memory");
  if (st != TL_OK) {
    tl_srv_tier_free(t);
    return st;
  }
  for (int i = 0; i < o->nurls; i++) {
    for (int v = 0; v < TL_TIER_VNODES; v++) {
      char name[TL_SRV_TIER_URL_MAX + 16];
      int nl = snprintf(name, sizeof name, "%s#%d", t->shards[i].url, v);
      t->ring[t->nring++] = (point){hash64(name, (size_t)nl), i};
    }
  }
  qsort(t->ring, (size_t)t->nring, sizeof *t->ring, cmp_point);
  char host[24] = "";
  gethostname(host, sizeof host - 1);
  snprintf(t->id, sizeof t->id, "%s:%d", host, (int)getpid());
  if (pthread_create(&t->renewer, NULL, renewer_main, t) != 0) {
    tl_srv_tier_free(t);
    return tl_error_set(err, TL_IO, "cannot start the lease renewer thread");
  }
  t->renewer_started = true;
  *out = t;
  return TL_OK;
}

void tl_srv_tier_free(tl_srv_tier *t) {
  if (!t)
    return;
  if (t->renewer_started) {
    pthread_mutex_lock(&t->lmu);
    t->stop = true;
    pthread_cond_signal(&t->lcv);
    pthread_mutex_unlock(&t->lmu);
    pthread_join(t->renewer, NULL);
  }
  while (t->held) {
    lease_rec *n = t->held->next;
    free(t->held);
    t->held = n;
  }
  for (int i = 0; i < t->nshards; i++)
    pthread_mutex_destroy(&t->shards[i].mu);
  pthread_mutex_destroy(&t->lmu);
  pthread_cond_destroy(&t->lcv);
  free(t->ring);
  cred *creds[] = {&t->primary_auth, &t->sentinel_auth}; /* the passwords */
  for (int k = 0; k < 2; k++) {
    volatile char *v = (volatile char *)creds[k];
    for (size_t i = 0; i < sizeof(cred); i++)
      v[i] = 0;
  }
  free(t);
}

int tl_srv_tier_up(tl_srv_tier *t, int *total) {
  int up = 0;
  for (int i = 0; i < t->nshards; i++)
    up += atomic_load(&t->shards[i].up);
  *total = t->nshards;
  return up;
}

void tl_srv_tier_json(tl_srv_tier *t, tl_srv_buf *b) {
  int n, up = tl_srv_tier_up(t, &n);
  tl_srv_buf_printf(b, "{\"state\": \"%s\", \"primaries\": [",
                    up == n ? "up" : up ? "degraded" : "down");
  for (int i = 0; i < t->nshards; i++) {
    shard *s = &t->shards[i];
    tl_srv_buf_puts(b, i ? ", {\"url\": \"" : "{\"url\": \"");
    tl_srv_buf_json_str(b, s->url);
    tl_srv_buf_printf(b, "\", \"up\": %s", atomic_load(&s->up) ? "true" : "false");
    pthread_mutex_lock(&s->mu);
    if (!atomic_load(&s->up) && s->last_error[0]) {
      tl_srv_buf_puts(b, ", \"error\": \"");
      tl_srv_buf_json_str(b, s->last_error);
      tl_srv_buf_puts(b, "\"");
    }
    pthread_mutex_unlock(&s->mu);
    tl_srv_buf_puts(b, "}");
  }
  tl_srv_buf_puts(b, "]}");
}
