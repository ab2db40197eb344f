/*
 * pool.c - the compile pool: a bounded queue of compile jobs, the
 * single-flight map, and one thread per worker process that takes jobs,
 * runs them in its worker (proc.c) and publishes what they produce in the
 * cache.
 *
 * Single-flight: a flight is one key being compiled.  While a flight for a
 * key is queued or running, every other request for that key joins it (a
 * waiter) instead of starting another compile; when the flight ends, every
 * waiter gets the same result.  A flight leaves the map only after its
 * build was published, and a thread that takes a flight from the queue
 * looks the key up in the cache first, so a request that missed the cache
 * just before a flight for its key ended is answered from the cache rather
 * than compiled again.  Together: one key, one compile.
 *
 * Bounds: at most `workers` compiles run and at most `queue` more wait; a
 * submission that would go beyond that is refused as a whole (the caller
 * answers 503).  Joining a flight costs no queue room.
 *
 * Publishing happens before the result is handed out, so a compile
 * request is acknowledged only for builds that are committed.
 *
 * With a shared tier (tier.c), a key missing in the local cache is asked
 * of the tier next: a hit is stored locally and answered; otherwise the
 * flight compiles under the tier's lease (or waits for the replica that
 * holds it, keeping its slot) and publishes to both levels.  The tier
 * never turns a request into an error: when it is down the flight
 * compiles as without it.
 *
 * Source jobs (tl_srv_job.source: a build's source generated again for the
 * status page) take the same queue and workers, so that the daemon's HTTP
 * threads never run the compiler: they are flights of their own kind (a
 * source job never joins a compile of its key, nor the reverse), bounded
 * by --source-timeout, never looked up in or published to a cache, and at
 * most TL_SRV_SOURCE_FLIGHTS of them are queued or running at once, so
 * status pages cannot take the workers from compiles.
 *
 * A client's share (--max-compiles-per-client, N; 0: none): the compile
 * flights a client address started (tl_srv_job.client; a join starts none)
 * are counted per address, queued and running.  A thread takes from the
 * queue the first flight whose client runs fewer than N, so a client's
 * flights past N wait while other clients' take the free workers; and a
 * submission that would give its client more than N + queue/2 flights
 * (TL_SRV_QUEUE_SHARE: half the queue waiting) is refused (TL_TOO_MANY:
 * 429), unless the client has none (one request may name more targets).
 * Together one client holds at most N workers and half the queue (or one
 * request's targets), however long its programs take to compile.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "server.h"

#define NBUCKETS 256

typedef struct waiter {
  tl_srv_done_fn fn;
  void *user;
  int index;
} waiter;

/* One client address with compile flights queued or running (freed at none). */
typedef struct client {
  char addr[TL_SRV_CLIENT_MAX];
  int flights, running;
  struct client *next;
} client;

typedef struct flight {
  tl_srv_job job;
  client *cl;           /* the client that started it; NULL: not counted (a source, no address, no limit) */
  waiter *w;
  int nw, capw;
  struct flight *hnext; /* map chain */
  struct flight *qnext; /* queue */
} flight;

typedef struct slot {
  struct tl_srv_pool *pool;
  int index;
  pthread_t thread;
  bool started;
  tl_srv_proc proc;
  tl_cache_build published; /* the last compile's build (borrowing the flight's strings) */
  void *bin;                /* and its bytes, until published to the tier */
  size_t bn;
} slot;

struct tl_srv_pool {
  tl_srv_pool_opts o;
  char *db_path;
  tl_cache_options cache_opts;
  pthread_mutex_t mu;
  pthread_cond_t work;  /* a flight was queued, or stopping */
  pthread_cond_t idle;  /* a running flight ended */
  flight *map[NBUCKETS];
  client *clients[NBUCKETS];
  flight *qhead, *qtail;
  int queued, running;
  int sources;          /* source flights queued or running */
  atomic_bool stopping; /* written under mu; read without it to skip a respawn */
  int cancel_pipe[2];
  slot *slots;
  atomic_int live;
};

static unsigned bucket_of(const char *key) {
  unsigned h = 0;
  for (int i = 0; i < 6; i++)
    h = h * 16 + (unsigned)(key[i] <= '9' ? key[i] - '0' : (key[i] | 0x20) - 'a' + 10);
  return h % NBUCKETS;
}

static flight *map_find(tl_srv_pool *p, const char *key, bool source) {
  for (flight *f = p->map[bucket_of(key)]; f; f = f->hnext)
    if (memcmp(f->job.key, key, 64) == 0 && f->job.source == source)
      return f;
  return NULL;
}

static unsigned client_bucket(const char *addr) {
  unsigned h = 2166136261u; /* FNV-1a */
  for (; *addr; addr++)
    h = (h ^ (unsigned char)*addr) * 16777619u;
  return h % NBUCKETS;
}

static client *client_find(tl_srv_pool *p, const char *addr) {
  for (client *c = p->clients[client_bucket(addr)]; c; c = c->next)
    if (strcmp(c->addr, addr) == 0)
      return c;
  return NULL;
}

/* A flight of cl ended (or was cancelled before it ran). */
static void client_done(tl_srv_pool *p, client *cl, bool ran) {
  if (!cl)
    return;
  cl->running -= ran;
  if (--cl->flights > 0)
    return;
  client **pp = &p->clients[client_bucket(cl->addr)];
  while (*pp && *pp != cl)
    pp = &(*pp)->next;
  if (*pp)
    *pp = cl->next;
  free(cl);
}

/* Takes the first queued flight whose client is under its share, or NULL. */
static flight *queue_take(tl_srv_pool *p) {
  flight *prev = NULL;
  for (flight *f = p->qhead; f; prev = f, f = f->qnext) {
    if (f->cl && f->cl->running >= p->o.max_per_client)
      continue;
    if (prev)
      prev->qnext = f->qnext;
    else
      p->qhead = f->qnext;
    if (p->qtail == f)
      p->qtail = prev;
    f->qnext = NULL;
    if (f->cl)
      f->cl->running++;
    return f;
  }
  return NULL;
}

static void map_remove(tl_srv_pool *p, flight *f) {
  flight **pp = &p->map[bucket_of(f->job.key)];
  while (*pp && *pp != f)
    pp = &(*pp)->hnext;
  if (*pp)
    *pp = f->hnext;
}

static bool add_waiter(flight *f, tl_srv_done_fn fn, void *user, int index) {
  if (f->nw == f->capw) {
    int nc = f->capw ? f->capw * 2 : 4;
    waiter *nw = realloc(f->w, (size_t)nc * sizeof *nw);
    if (!nw)
      return false;
    f->w = nw;
    f->capw = nc;
  }
  f->w[f->nw++] = (waiter){fn, user, index};
  return true;
}

/* Hands res to every waiter of f and frees f.  f is out of the map and the
 * queue already.  Consumes the caller's reference to res. */
static void deliver(flight *f, tl_srv_result *res) {
  for (int i = 0; i < f->nw; i++)
    f->w[i].fn(f->w[i].user, f->w[i].index, tl_srv_result_ref(res));
  tl_srv_result_unref(res);
  free(f->w);
  tl_srv_job_clear(&f->job);
  free(f);
}

/* A result made from a build found in the cache. */
static tl_srv_result *from_cache(const tl_cache_build *b) {
  tl_srv_result *r = tl_srv_result_new();
  if (!r)
    return NULL;
  memcpy(r->key, b->key, 65);
  memcpy(r->artifact, b->artifact_id, 65);
  r->size = b->size;
  r->compile_ms = (double)b->compile_ms;
  r->cached = true;
  r->meta = strdup(b->metadata ? b->metadata : "{}");
  if (!r->meta) {
    tl_srv_result_unref(r);
    return NULL;
  }
  return r;
}

/* Starts the slot's worker if it has none (or its worker exited while idle). */
static tl_status ensure_worker(slot *s, tl_error *err) {
  tl_srv_pool *p = s->pool;
  if (s->proc.pid > 0) {
    /* WNOWAIT: a dead worker stays a zombie, so its pid (the id of its
     * session) cannot be reused while what it left running is killed */
    siginfo_t si = {0};
    if (waitid(P_PID, (id_t)s->proc.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == 0)
      return TL_OK;
    /* it exited while idle (e.g. killed from outside): end what it left
     * running, reap it, start another */
    tl_srv_proc_kill_session(s->proc.pid);
    int status;
    waitpid(s->proc.pid, &status, 0);
    close(s->proc.fd);
    s->proc.pid = 0;
    s->proc.fd = -1;
    atomic_fetch_sub(&p->live, 1);
  }
  tl_status st = tl_srv_proc_spawn(&p->o.proc, &s->proc, err);
  if (st == TL_OK) {
    atomic_fetch_add(&p->live, 1);
    atomic_fetch_add(&p->o.metrics->worker_spawns, 1);
  }
  return st;
}

/* Asks the shared tier for f's key after a local miss.  A hit is stored
 * in the local cache and returned; NULL: compile (under *lease when held). */
static tl_srv_result *from_tier(tl_srv_pool *p, tl_cache *cache, tl_srv_tier_conn *tc, flight *f,
                                tl_srv_tier_lease *lease) {
  tl_cache_build *b = NULL;
  void *bytes = NULL;
  size_t n = 0;
  /* a waiter gives up in time to compile within the request's own bound */
  if (tl_srv_tier_acquire(tc, f->job.key, p->o.compile_timeout, &p->stopping, lease, &b, &bytes, &n) !=
      TL_TIER_HIT)
    return NULL;
  tl_error err;
  if (tl_cache_put(cache, b, bytes, n, &err) != TL_OK) {
    atomic_fetch_add(&p->o.metrics->publish_failures, 1);
    fprintf(stderr, "tlserverd: a build from the tier could not be stored locally: %s\n",
            err.message);
  }
  tl_srv_result *r = from_cache(b);
  tl_cache_build_free(b);
  free(bytes);
  return r;
}

/* Runs f's job in the slot's worker (started when it has none) within
 * timeout_s: tl_srv_proc_run's result (*ran true: *outcome says how it
 * went), or an error result when the job could not be run. */
static tl_srv_result *run_in_worker(slot *s, flight *f, double timeout_s, bool *ran,
                                    tl_srv_compile_outcome *outcome, void **bin, size_t *bn) {
  tl_srv_pool *p = s->pool;
  tl_error err;
  tl_error_clear(&err);
  *ran = false;
  *bin = NULL;
  *bn = 0;
  if (ensure_worker(s, &err) != TL_OK)
    return tl_srv_result_error(TL_INTERNAL, "%s", err.message);
  tl_srv_result *r = NULL;
  tl_status st = tl_srv_proc_run(&s->proc, &f->job, timeout_s, p->cancel_pipe[0], outcome, &r, bin, bn, &err);
  if (s->proc.pid == 0)
    atomic_fetch_sub(&p->live, 1);
  *ran = st == TL_OK;
  return st == TL_OK ? r : tl_srv_result_error(st, "%s", err.message);
}

/* Compiles f's job in the slot's worker and stores the build in the local
 * cache; a success leaves the build in s->published and its bytes in
 * s->bin (freed by the caller). */
static tl_srv_result *compile_flight(slot *s, tl_cache *cache, flight *f) {
  tl_srv_pool *p = s->pool;
  tl_srv_metrics *m = p->o.metrics;
  tl_error err;
  tl_error_clear(&err);
  tl_srv_compile_outcome outcome;
  void *bin = NULL;
  size_t bn = 0;
  bool ran;
  int64_t t0 = tl_srv_now_us();
  atomic_fetch_add(&m->compiles_running, 1);
  tl_srv_result *r = run_in_worker(s, f, p->o.compile_timeout, &ran, &outcome, &bin, &bn);
  atomic_fetch_sub(&m->compiles_running, 1);
  if (!ran)
    return r;
  tl_srv_metrics_compile(m, outcome, (double)(tl_srv_now_us() - t0) / 1e6);
  if (r->err.code != TL_OK) {
    free(bin);
    return r;
  }
  tl_cache_build b = {0};
  memcpy(b.key, f->job.key, 65);
  memcpy(b.artifact_id, r->artifact, 65);
  b.manifest = f->job.manifest ? f->job.manifest : "";
  b.target = f->job.target;
  b.metadata = r->meta;
  b.compile_ms = (int64_t)(r->compile_ms + 0.5);
  b.size = (int64_t)bn;
  tl_status st = tl_cache_put(cache, &b, bin, bn, &err);
  s->published = b;
  s->bin = bin;
  s->bn = bn;
  if (st != TL_OK) {
    atomic_fetch_add(&m->publish_failures, 1);
    tl_srv_result_unref(r);
    return tl_srv_result_error(st, "the build compiled but could not be stored: %s", err.message);
  }
  return r;
}

/* Generates f's source in the slot's worker, within --source-timeout. */
static tl_srv_result *source_flight(slot *s, flight *f) {
  tl_srv_compile_outcome outcome;
  void *bin = NULL;
  size_t bn = 0;
  bool ran;
  tl_srv_result *r = run_in_worker(s, f, s->pool->o.source_timeout, &ran, &outcome, &bin, &bn);
  free(bin); /* the result holds its own copy of the source */
  if (ran)
    atomic_fetch_add(&s->pool->o.metrics->sources[outcome], 1);
  return r;
}

/* Compiles f's job (or finds it in the cache or the tier) and publishes the build. */
static tl_srv_result *run_flight(slot *s, tl_cache **cache, tl_srv_tier_conn **tc, flight *f) {
  tl_srv_pool *p = s->pool;
  tl_srv_metrics *m = p->o.metrics;
  tl_error err;
  tl_error_clear(&err);
  if (f->job.source)
    return source_flight(s, f);
  if (!*cache)
    tl_cache_open(p->db_path, &p->cache_opts, cache, &err);
  if (*cache) {
    tl_cache_build *b = NULL;
    if (tl_cache_get_build(*cache, f->job.key, &b, NULL) == TL_OK) {
      tl_srv_result *r = from_cache(b);
      tl_cache_build_free(b);
      atomic_fetch_add(&m->rechecked_hits, 1);
      return r;
    }
  } else {
    return tl_srv_result_error(err.code, "cannot open the cache: %s", err.message);
  }
  tl_srv_tier_lease lease = {0};
  if (p->o.tier && (*tc || (*tc = tl_srv_tier_conn_new(p->o.tier)))) {
    tl_srv_result *r = from_tier(p, *cache, *tc, f, &lease);
    if (r)
      return r;
    if (!lease.held && atomic_load(&p->stopping)) /* a wait cut short by the shutdown */
      return tl_srv_result_error(TL_BUSY, "the server is shutting down; the compile was not started");
  }
  tl_srv_result *r = compile_flight(s, *cache, f);
  if (*tc) /* the build (or the failure) for the other replicas */
    tl_srv_tier_publish(*tc, &lease, r && r->err.code == TL_OK ? &s->published : NULL,
                        s->bin, s->bn);
  free(s->bin);
  s->bin = NULL;
  s->bn = 0;
  return r;
}

static void *slot_main(void *arg) {
  slot *s = arg;
  tl_srv_pool *p = s->pool;
  tl_cache *cache = NULL;
  tl_srv_tier_conn *tc = NULL;
  tl_error err;
  /* Start the worker now, so the first compile finds it warm. */
  if (ensure_worker(s, &err) != TL_OK)
    fprintf(stderr, "tlserverd: %s\n", err.message);
  for (;;) {
    pthread_mutex_lock(&p->mu);
    flight *f;
    while (!(f = queue_take(p)) && !p->stopping)
      pthread_cond_wait(&p->work, &p->mu);
    if (!f) {
      pthread_mutex_unlock(&p->mu);
      break;
    }
    p->queued--;
    p->running++;
    atomic_fetch_sub(&p->o.metrics->queue_depth, 1);
    pthread_mutex_unlock(&p->mu);

    tl_srv_result *res = run_flight(s, &cache, &tc, f);
    if (!res)
      res = tl_srv_result_error(TL_NOMEM, "out of memory");
    if (res && !res->key[0])
      memcpy(res->key, f->job.key, 65);

    pthread_mutex_lock(&p->mu);
    map_remove(p, f);
    p->running--;
    p->sources -= f->job.source;
    if (f->cl) { /* its client's next flight may run now */
      client_done(p, f->cl, true);
      pthread_cond_broadcast(&p->work);
    }
    pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->mu);
    if (res)
      deliver(f, res);
    /* A worker that died or was killed is replaced now, not at the next
     * compile, which then finds it warm. */
    if (s->proc.pid == 0 && !p->stopping && ensure_worker(s, &err) != TL_OK)
      fprintf(stderr, "tlserverd: %s\n", err.message);
  }
  if (s->proc.pid > 0) {
    tl_srv_proc_kill(&s->proc);
    atomic_fetch_sub(&p->live, 1);
  }
  tl_cache_close(cache);
  tl_srv_tier_conn_free(tc);
  return NULL;
}

tl_status tl_srv_pool_new(const tl_srv_pool_opts *o, tl_srv_pool **out, tl_error *err) {
  *out = NULL;
  tl_srv_pool *p = calloc(1, sizeof *p);
  if (!p)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  p->o = *o;
  p->cancel_pipe[0] = p->cancel_pipe[1] = -1;
  if (o->cache_opts)
    p->cache_opts = *o->cache_opts;
  p->db_path = strdup(o->db_path);
  p->slots = calloc((size_t)o->workers, sizeof *p->slots);
  if (!p->db_path || !p->slots) {
    tl_srv_pool_free(p);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  if (pipe(p->cancel_pipe) != 0 || fcntl(p->cancel_pipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(p->cancel_pipe[1], F_SETFD, FD_CLOEXEC) != 0) {
    tl_srv_pool_free(p);
    return tl_error_set(err, TL_IO, "pipe: %s", strerror(errno));
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->idle, &ca);
  pthread_condattr_destroy(&ca);
  for (int i = 0; i < o->workers; i++) {
    slot *s = &p->slots[i];
    s->pool = p;
    s->index = i;
    s->proc.fd = -1;
    if (pthread_create(&s->thread, NULL, slot_main, s) != 0) {
      tl_srv_pool_shutdown(p, 0);
      tl_srv_pool_free(p);
      return tl_error_set(err, TL_IO, "cannot start a compile thread");
    }
    s->started = true;
  }
  *out = p;
  return TL_OK;
}

tl_status tl_srv_pool_submit(tl_srv_pool *p, tl_srv_job *jobs, const int *indexes, int n,
                             tl_srv_done_fn done, void *user, int *joined, tl_error *err) {
  *joined = 0;
  /* Flights are allocated before taking the lock. */
  flight **fresh = calloc((size_t)(n ? n : 1), sizeof *fresh);
  if (!fresh)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    if (!(fresh[i] = calloc(1, sizeof **fresh)) || !add_waiter(fresh[i], done, user, indexes[i])) {
      for (int k = 0; k <= i; k++) {
        if (fresh[k])
          free(fresh[k]->w);
        free(fresh[k]);
      }
      free(fresh);
      return tl_error_set(err, TL_NOMEM, "out of memory");
    }
  }
  tl_status st = TL_OK;
  pthread_mutex_lock(&p->mu);
  if (p->stopping) {
    st = tl_error_set(err, TL_BUSY, "the server is shutting down");
    goto out;
  }
  int need = 0, need_sources = 0, need_client = 0;
  for (int i = 0; i < n; i++) {
    bool dup = map_find(p, jobs[i].key, jobs[i].source) != NULL;
    for (int k = 0; k < i && !dup; k++)
      dup = memcmp(jobs[k].key, jobs[i].key, 64) == 0 && jobs[k].source == jobs[i].source;
    need += !dup;
    need_sources += !dup && jobs[i].source;
    need_client += !dup && !jobs[i].source && jobs[i].client[0] && p->o.max_per_client > 0;
  }
  client *cl = need_client ? client_find(p, jobs[0].client) : NULL;
  int waiting_share = TL_SRV_QUEUE_SHARE(p->o.queue);
  if (cl && cl->flights + need_client > p->o.max_per_client + waiting_share) {
    atomic_fetch_add(&p->o.metrics->client_limited, 1);
    st = tl_error_set(err, TL_TOO_MANY,
                      "this client (%s) has %d compile%s queued or running and this request would start %d "
                      "more; a client may have %d running and %d waiting (--max-compiles-per-client and half "
                      "of --queue; GET /v1/info: limits.max_compiles_per_client, "
                      "limits.max_queued_per_client); retry when one has ended",
                      cl->addr, cl->flights, cl->flights == 1 ? "" : "s", need_client, p->o.max_per_client,
                      waiting_share);
    goto out;
  }
  if (need_sources > 0 && p->sources + need_sources > TL_SRV_SOURCE_FLIGHTS) {
    atomic_fetch_add(&p->o.metrics->overloaded, 1);
    st = tl_error_set(err, TL_BUSY,
                      "%d sources are being generated already (at most %d at a time, so that status "
                      "pages never hold the compile workers); retry in a moment",
                      p->sources, TL_SRV_SOURCE_FLIGHTS);
    goto out;
  }
  if (need > 0 && p->queued + p->running + need > p->o.workers + p->o.queue) {
    atomic_fetch_add(&p->o.metrics->overloaded, 1);
    st = tl_error_set(err, TL_BUSY,
                      "the compile queue is full (%d running, %d waiting); retry later",
                      p->running, p->queued);
    goto out;
  }
  for (int i = 0; i < n; i++) {
    flight *f = map_find(p, jobs[i].key, jobs[i].source);
    if (f) {
      if (!add_waiter(f, done, user, indexes[i])) {
        /* cannot wait for it: answer this one as out of memory */
        pthread_mutex_unlock(&p->mu);
        done(user, indexes[i], tl_srv_result_error(TL_NOMEM, "out of memory"));
        pthread_mutex_lock(&p->mu);
      } else {
        (*joined)++;
      }
      continue;
    }
    f = fresh[i];
    fresh[i] = NULL;
    f->job = jobs[i];
    memset(&jobs[i], 0, sizeof jobs[i]);
    if (need_client && !f->job.source) {
      if (!cl && (cl = calloc(1, sizeof *cl))) {
        memcpy(cl->addr, f->job.client, sizeof cl->addr);
        unsigned cb = client_bucket(cl->addr);
        cl->next = p->clients[cb];
        p->clients[cb] = cl;
      }
      if (cl) /* (without memory for it, the flight is not counted) */
        cl->flights++;
      f->cl = cl;
    }
    p->sources += f->job.source;
    unsigned b = bucket_of(f->job.key);
    f->hnext = p->map[b];
    p->map[b] = f;
    if (p->qtail)
      p->qtail->qnext = f;
    else
      p->qhead = f;
    p->qtail = f;
    p->queued++;
    atomic_fetch_add(&p->o.metrics->queue_depth, 1);
  }
  if (*joined)
    atomic_fetch_add(&p->o.metrics->singleflight_joins, *joined);
  pthread_cond_broadcast(&p->work);
out:
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < n; i++) {
    if (fresh[i])
      free(fresh[i]->w);
    free(fresh[i]);
  }
  free(fresh);
  return st;
}

void tl_srv_pool_shutdown(tl_srv_pool *p, double grace_s) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  flight *cancelled = p->qhead;
  for (flight *f = cancelled; f; f = f->qnext) {
    map_remove(p, f);
    p->sources -= f->job.source;
    client_done(p, f->cl, false);
  }
  atomic_fetch_sub(&p->o.metrics->queue_depth, p->queued);
  p->qhead = p->qtail = NULL;
  p->queued = 0;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  while (cancelled) {
    flight *next = cancelled->qnext;
    tl_srv_result *r =
        tl_srv_result_error(TL_BUSY, "the server is shutting down; the compile was not started");
    if (r) {
      memcpy(r->key, cancelled->job.key, 65);
      deliver(cancelled, r);
    }
    cancelled = next;
  }
  /* Running compiles get the grace period. */
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += (time_t)grace_s;
  deadline.tv_nsec += (long)((grace_s - (double)(time_t)grace_s) * 1e9);
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&p->mu);
  while (p->running > 0) {
    if (pthread_cond_timedwait(&p->idle, &p->mu, &deadline) == ETIMEDOUT)
      break;
  }
  pthread_mutex_unlock(&p->mu);
  if (p->cancel_pipe[1] >= 0) {
    char c = 1;
    ssize_t w = write(p->cancel_pipe[1], &c, 1); /* interrupts the running ones */
    (void)w;
  }
  for (int i = 0; i < p->o.workers; i++) {
    if (p->slots[i].started) {
      pthread_join(p->slots[i].thread, NULL);
      p->slots[i].started = false;
    }
  }
}

void tl_srv_pool_free(tl_srv_pool *p) {
  if (!p)
    return;
  if (p->cancel_pipe[0] >= 0) {
    close(p->cancel_pipe[0]);
    close(p->cancel_pipe[1]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
  }
  free(p->slots);
  free(p->db_path);
  free(p);
}

int tl_srv_pool_live_workers(tl_srv_pool *p) { return atomic_load(&p->live); }
