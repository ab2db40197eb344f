/*
 * conns.c - deadlines for the connections of tlserverd, which
 * libmicrohttpd does not have: its only clock is the idle time-out, which
 * every byte resets, so a client that sends one header line every few
 * seconds, or a body a byte at a time, holds its connection (and its slot
 * of --max-connections) for as long as it likes.
 *
 * Every connection is in one phase, each with its own deadline counted
 * from the phase's start:
 *
 *   HEAD  from the accept (or from the request line of a later request on
 *         a kept-alive connection) until every header is in: --header-timeout;
 *   BODY  from then until the whole body is in: --body-timeout;
 *   BUSY  the handler runs, waits for a compile or sends its answer: no
 *         deadline here (the compile has its own, sending the idle one);
 *   IDLE  between two requests of a kept-alive connection: the idle
 *         time-out plus the header time-out (libmicrohttpd closes a silent
 *         one after the idle time-out; this catches one that trickles the
 *         next request line a byte at a time).
 *
 * Under pressure, when at least 3/4 of --max-connections are open, a
 * connection still sending its request line and headers (HEAD) or idle
 * between requests (IDLE) gets --pressure-timeout (default 1 s) instead: a
 * client that means to send a request has sent its headers well within a
 * second, so this only cuts the slow ones, and a slow-header attack from
 * many addresses (each under --max-connections-per-ip) cannot keep every
 * slot for the header time-out (bench/soak.md measures it).  A body (BODY)
 * keeps --body-timeout, but once it has been coming in for longer than
 * --pressure-timeout it must have averaged --min-body-rate (default 64 KiB
 * a second) since its start, or the connection is cut: bodies trickled
 * from many addresses would otherwise hold every slot for the body
 * time-out.  The floor applies too while the request bodies in flight hold
 * more than 3/4 of --max-body-total (a few trickled bodies announcing a
 * large Content-Length would otherwise hold the whole budget, and every
 * other upload would get 503, without any pressure on the connections).
 *
 * The floor alone does not free the budget from bodies sent at exactly
 * its rate: a body announced with Content-Length reserves its whole size
 * from --max-body-total at its start, so 34 bodies of 3.75 MiB sent at 64
 * KiB a second (about 18 Mbit/s in all) would hold the default 128 MiB for the
 * body time-out, and every other upload would get 503 meanwhile.  So the
 * budget is shared as Redis shares its clients' memory (maxmemory-clients
 * evicts clients to make room): when a request is refused for room
 * (http.c calls tl_srv_conns_body_refused with its size), the next sweep
 * cuts the slowest bodies (the lowest average rate since their start,
 * among those in BODY for longer than --pressure-timeout) until what is
 * left holds at most 3/4 of --max-body-total and leaves the refused size
 * free, so the client's retry after its Retry-After fits.  Whoever holds
 * the budget must keep ahead of the others' rate, not only of the floor;
 * a fast upload (done within --pressure-timeout) is never cut, and a body
 * nobody else waits for is never cut for room.
 *
 * A thread looks at every connection twice a second (ten times a second
 * under pressure) and cuts the overdue ones with shutdown(2): libmicrohttpd then sees the end of the stream and
 * closes the connection itself (no answer is sent: the request never came
 * in whole).  It also cuts a connection in any phase but BUSY whose client
 * closed its side (a half-closed connection can never finish a request,
 * and libmicrohttpd would keep it until the idle time-out).
 *
 * Thread safety: one mutex guards the list; libmicrohttpd calls the closed
 * notification before it closes the descriptor, and that notification
 * takes the mutex, so the sweep never shuts down a descriptor that was
 * closed and reused.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include "server.h"

struct tl_srv_conn {
  tl_srv_conn *prev, *next;
  int fd;
  tl_srv_conn_phase phase;
  int64_t since_us;
  _Atomic int64_t body_bytes; /* of the body, since the phase BODY began (counted without the
                                 list's lock: it is on every upload's path) */
  _Atomic int64_t reserved;   /* bytes of --max-body-total its request holds */
  bool cut;
};

struct tl_srv_conns {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  tl_srv_conn list; /* sentinel of a circular list */
  int open;          /* connections in the list */
  int pressure_at;   /* open connections from which the pressure limits apply; 0: never */
  int64_t budget_at; /* body bytes held above which they apply (3/4 of --max-body-total) */
  int64_t budget;    /* --max-body-total */
  int64_t wanted;    /* the largest request refused for room since the last sweep; 0: none */
  int64_t limit_us[TL_CONN_PHASE_COUNT_]; /* 0: none */
  int64_t pressure_us;   /* --pressure-timeout */
  int64_t min_body_rate; /* --min-body-rate, bytes a second; 0: none */
  tl_srv_metrics *metrics;
  pthread_t thread;
  bool started, stop;
};

static const char *const phase_names[TL_CONN_PHASE_COUNT_] = {"head", "body", "busy", "idle"};

const char *tl_srv_conn_phase_name(tl_srv_conn_phase p) { return phase_names[p]; }

/* True when the peer has closed its side and nothing is left to read. */
static bool peer_closed(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* True when c's body, under pressure, has come in for longer than
 * --pressure-timeout at less than --min-body-rate on average. */
static bool body_too_slow(const tl_srv_conns *cs, const tl_srv_conn *c, int64_t now) {
  int64_t t = now - c->since_us; /* microseconds */
  return c->phase == TL_CONN_BODY && cs->min_body_rate > 0 && t > cs->pressure_us &&
         (double)atomic_load(&c->body_bytes) < (double)cs->min_body_rate * (double)t * 1e-6;
}

/* Cuts c, for reason why; *held less what its close will free. */
static void cut(tl_srv_conns *cs, tl_srv_conn *c, int why, int64_t *held) {
  c->cut = true;
  shutdown(c->fd, SHUT_RDWR);
  *held -= atomic_load(&c->reserved);
  if (cs->metrics)
    atomic_fetch_add(&cs->metrics->connections_cut[why], 1);
}

/* The budget's eviction: cuts the slowest bodies past --pressure-timeout
 * (lowest average rate first) until the others hold at most
 * min(budget_at, budget - wanted) bytes. */
static void make_room(tl_srv_conns *cs, int64_t now, int64_t held, int64_t wanted) {
  int64_t target = cs->budget - wanted < cs->budget_at ? cs->budget - wanted : cs->budget_at;
  while (held > target) {
    tl_srv_conn *slowest = NULL;
    double slowest_rate = 0;
    for (tl_srv_conn *c = cs->list.next; c != &cs->list; c = c->next) {
      int64_t t = now - c->since_us;
      if (c->cut || c->fd < 0 || c->phase != TL_CONN_BODY || t <= cs->pressure_us ||
          atomic_load(&c->reserved) <= 0)
        continue;
      double rate = (double)atomic_load(&c->body_bytes) / (double)t;
      if (!slowest || rate < slowest_rate) {
        slowest = c;
        slowest_rate = rate;
      }
    }
    if (!slowest)
      return; /* only young bodies hold it: the refused client's retry may find room */
    cut(cs, slowest, TL_CONN_CUT_BODY_BUDGET, &held);
  }
}

/* Cuts the overdue connections; true when under pressure. */
static bool sweep(tl_srv_conns *cs) {
  int64_t now = tl_srv_now_us();
  pthread_mutex_lock(&cs->mu);
  int64_t wanted = cs->wanted;
  cs->wanted = 0;
  int64_t held = cs->metrics ? atomic_load(&cs->metrics->body_bytes) : 0;
  for (tl_srv_conn *c = cs->list.next; c != &cs->list; c = c->next)
    if (c->cut) /* its close will free it */
      held -= atomic_load(&c->reserved);
  bool slots = cs->pressure_at > 0 && cs->open >= cs->pressure_at; /* pressure on the connections */
  bool pressure = slots || (cs->budget_at > 0 && held > cs->budget_at); /* or on the body budget */
  for (tl_srv_conn *c = cs->list.next; c != &cs->list; c = c->next) {
    if (c->cut || c->fd < 0)
      continue;
    int64_t limit = cs->limit_us[c->phase];
    if (slots && (c->phase == TL_CONN_HEAD || c->phase == TL_CONN_IDLE) &&
        (limit == 0 || limit > cs->pressure_us))
      limit = cs->pressure_us;
    int why = c->phase;
    if (!(limit > 0 && now - c->since_us > limit)) {
      if (pressure && body_too_slow(cs, c, now))
        why = TL_CONN_CUT_BODY_RATE;
      else if (c->phase != TL_CONN_BUSY && peer_closed(c->fd))
        why = TL_CONN_CUT_HALF_CLOSED;
      else
        continue;
    }
    cut(cs, c, why, &held);
  }
  if (wanted > 0)
    make_room(cs, now, held, wanted);
  pthread_mutex_unlock(&cs->mu);
  return pressure;
}

static void *sweep_main(void *arg) {
  tl_srv_conns *cs = arg;
  pthread_mutex_lock(&cs->mu);
  while (!cs->stop) {
    pthread_mutex_unlock(&cs->mu);
    bool pressure = sweep(cs);
    pthread_mutex_lock(&cs->mu);
    if (cs->stop)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (pressure ? 100 : 500) * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&cs->cv, &cs->mu, &ts);
  }
  pthread_mutex_unlock(&cs->mu);
  return NULL;
}

tl_srv_conns *tl_srv_conns_new(const tl_srv_config *cfg, tl_srv_metrics *metrics) {
  tl_srv_conns *cs = calloc(1, sizeof *cs);
  if (!cs)
    return NULL;
  pthread_mutex_init(&cs->mu, NULL);
  pthread_cond_init(&cs->cv, NULL);
  cs->list.next = cs->list.prev = &cs->list;
  cs->limit_us[TL_CONN_HEAD] = (int64_t)(cfg->header_timeout * 1e6);
  cs->limit_us[TL_CONN_BODY] = (int64_t)(cfg->body_timeout * 1e6);
  cs->limit_us[TL_CONN_BUSY] = 0;
  cs->limit_us[TL_CONN_IDLE] = (int64_t)((cfg->idle_timeout + cfg->header_timeout) * 1e6);
  cs->pressure_us = (int64_t)(cfg->pressure_timeout * 1e6);
  cs->min_body_rate = cfg->min_body_rate;
  cs->pressure_at = cfg->max_connections > 0 ? (cfg->max_connections * 3 + 3) / 4 : 0;
  cs->budget = cfg->max_body_total;
  cs->budget_at = cfg->max_body_total / 4 * 3;
  cs->metrics = metrics;
  if (pthread_create(&cs->thread, NULL, sweep_main, cs) != 0) {
    tl_srv_conns_free(cs);
    return NULL;
  }
  cs->started = true;
  return cs;
}

void tl_srv_conns_free(tl_srv_conns *cs) {
  if (!cs)
    return;
  if (cs->started) {
    pthread_mutex_lock(&cs->mu);
    cs->stop = true;
    pthread_cond_signal(&cs->cv);
    pthread_mutex_unlock(&cs->mu);
    pthread_join(cs->thread, NULL);
  }
  /* libmicrohttpd has closed every connection (and called tl_srv_conn_closed) */
  pthread_mutex_destroy(&cs->mu);
  pthread_cond_destroy(&cs->cv);
  free(cs);
}

tl_srv_conn *tl_srv_conn_opened(tl_srv_conns *cs, int fd) {
  tl_srv_conn *c = calloc(1, sizeof *c);
  if (!c)
    return NULL; /* the connection runs without deadlines */
  c->fd = fd;
  c->phase = TL_CONN_HEAD;
  c->since_us = tl_srv_now_us();
  pthread_mutex_lock(&cs->mu);
  c->next = cs->list.next;
  c->prev = &cs->list;
  c->next->prev = c;
  cs->list.next = c;
  cs->open++;
  pthread_mutex_unlock(&cs->mu);
  return c;
}

void tl_srv_conn_closed(tl_srv_conns *cs, tl_srv_conn *c) {
  if (!c)
    return;
  pthread_mutex_lock(&cs->mu);
  c->prev->next = c->next;
  c->next->prev = c->prev;
  cs->open--;
  pthread_mutex_unlock(&cs->mu);
  free(c);
}

void tl_srv_conn_enter(tl_srv_conns *cs, tl_srv_conn *c, tl_srv_conn_phase p) {
  if (!c)
    return;
  pthread_mutex_lock(&cs->mu);
  if (c->phase != p) {
    c->phase = p;
    c->since_us = tl_srv_now_us();
    atomic_store(&c->body_bytes, 0);
  }
  pthread_mutex_unlock(&cs->mu);
}

void tl_srv_conn_body_bytes(tl_srv_conns *cs, tl_srv_conn *c, size_t n) {
  (void)cs;
  if (c)
    atomic_fetch_add(&c->body_bytes, (int64_t)n);
}

void tl_srv_conn_body_reserved(tl_srv_conns *cs, tl_srv_conn *c, int64_t delta) {
  (void)cs;
  if (c)
    atomic_fetch_add(&c->reserved, delta);
}

void tl_srv_conns_body_refused(tl_srv_conns *cs, int64_t bytes) {
  if (!cs)
    return;
  pthread_mutex_lock(&cs->mu);
  if (bytes > cs->wanted)
    cs->wanted = bytes;
  pthread_cond_signal(&cs->cv); /* sweep now */
  pthread_mutex_unlock(&cs->mu);
}
