/*
 * metrics.c - tlserverd's counters and their Prometheus text exposition
 * (GET /metrics, text format 0.0.4).
 *
 * Every counter is a C11 atomic updated with relaxed ordering: a scrape
 * sees each counter's own value, not a snapshot of all of them at one
 * instant, which is what Prometheus expects.  Requests are counted by route
 * and by HTTP status out of a fixed list (anything else is counted as
 * code="other"), so the number of series is bounded whatever clients send.
 * The cache's sizes and its persistent counters (integrity failures, which
 * any process sharing the file may find) come from tl_cache_get_stats at
 * scrape time.
 */
#include <stdio.h>
#include <string.h>
#include "server.h"

static const int http_codes[TL_SRV_HTTP_CODES - 1] = {
    200, 206, 304, 400, 401, 403, 404, 405, 411, 413, 415, 416, 422, 429, 431, 500, 501, 502, 503, 504,
};

static const double compile_buckets[TL_SRV_COMPILE_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
};

static const char *const route_names[TL_ROUTE_COUNT_] = {
    "healthz", "readyz", "info", "metrics", "compile", "artifacts", "kernels", "status", "bundles", "tunings", "other",
};

static const char *const outcome_names[TL_COMPILE_OUTCOME_COUNT_] = {
    "ok", "error", "timeout", "crash",
};

const char *tl_srv_route_name(tl_srv_route r) {
  return (unsigned)r < TL_ROUTE_COUNT_ ? route_names[r] : "other";
}

static int code_slot(int status) {
  for (int i = 0; i < TL_SRV_HTTP_CODES - 1; i++)
    if (http_codes[i] == status)
      return i;
  return TL_SRV_HTTP_CODES - 1;
}

#define ADD(field, v) atomic_fetch_add_explicit(&(field), (v), memory_order_relaxed)
#define GET(field) atomic_load_explicit(&(field), memory_order_relaxed)

void tl_srv_metrics_request(tl_srv_metrics *m, tl_srv_route route, int status, int64_t bytes,
                            int64_t us) {
  if ((unsigned)route >= TL_ROUTE_COUNT_)
    route = TL_ROUTE_OTHER;
  ADD(m->requests[route][code_slot(status)], 1);
  ADD(m->request_us[route], us);
  ADD(m->response_bytes[route], bytes);
}

void tl_srv_metrics_compile(tl_srv_metrics *m, tl_srv_compile_outcome o, double seconds) {
  ADD(m->compiles[o], 1);
  ADD(m->compile_us_sum, (long long)(seconds * 1e6));
  int b = 0;
  while (b < TL_SRV_COMPILE_BUCKETS && seconds > compile_buckets[b])
    b++;
  ADD(m->compile_bucket[b], 1);
}

static void counter(tl_srv_buf *b, const char *name, const char *help, long long v) {
  tl_srv_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %lld\n", name, help, name, name, v);
}

static void gauge(tl_srv_buf *b, const char *name, const char *help, double v) {
  tl_srv_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

/* A label value: escapes backslash, quote and newline. */
static void label(tl_srv_buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == '"')
      tl_srv_buf_printf(b, "\\%c", *s);
    else if (*s == '\n')
      tl_srv_buf_puts(b, "\\n");
    else
      tl_srv_buf_append(b, s, 1);
  }
}

void tl_srv_metrics_render(const tl_srv_metrics *mc, const tl_srv_metrics_extra *x, tl_srv_buf *b) {
  tl_srv_metrics *m = (tl_srv_metrics *)mc; /* atomic loads take non-const pointers */

  tl_srv_buf_puts(b, "# HELP tlserverd_build_info The server's version and toolchain.\n"
                     "# TYPE tlserverd_build_info gauge\n"
                     "tlserverd_build_info{version=\"" TL_SERVER_VERSION "\",toolchain=\"");
  label(b, x->toolchain ? x->toolchain : "none");
  tl_srv_buf_puts(b, "\"} 1\n");
  gauge(b, "tlserverd_uptime_seconds", "Seconds since the server started.", x->uptime_s);
  gauge(b, "tlserverd_draining", "1 while the server shuts down.", x->draining ? 1 : 0);
  gauge(b, "tlserverd_ready", "1 when /readyz answers 200: every check below passed and the "
        "server is not shutting down (the shared tier is no check: its Redis down leaves it 1).",
        x->ready ? 1 : 0);
  tl_srv_buf_puts(b, "# HELP tlserverd_ready_check The readiness checks at their last probe "
                     "(once a second): 1 passed, 0 failed (/readyz says why).\n"
                     "# TYPE tlserverd_ready_check gauge\n");
  for (int i = 0; i < TL_READY_COUNT_; i++)
    tl_srv_buf_printf(b, "tlserverd_ready_check{check=\"%s\"} %d\n",
                      tl_srv_ready_check_name((tl_srv_ready_check)i), x->ready_check[i] ? 1 : 0);

  /* requests */
  tl_srv_buf_puts(b, "# HELP tlserverd_requests_total HTTP requests answered, by route and status.\n"
                     "# TYPE tlserverd_requests_total counter\n");
  for (int r = 0; r < TL_ROUTE_COUNT_; r++) {
    for (int c = 0; c < TL_SRV_HTTP_CODES; c++) {
      long long v = GET(m->requests[r][c]);
      if (v == 0)
        continue;
      if (c < TL_SRV_HTTP_CODES - 1)
        tl_srv_buf_printf(b, "tlserverd_requests_total{route=\"%s\",code=\"%d\"} %lld\n",
                          route_names[r], http_codes[c], v);
      else
        tl_srv_buf_printf(b, "tlserverd_requests_total{route=\"%s\",code=\"other\"} %lld\n",
                          route_names[r], v);
    }
  }
  tl_srv_buf_puts(b, "# HELP tlserverd_request_seconds_total Time spent on requests, by route "
                     "(from the first byte read to the last byte sent).\n"
                     "# TYPE tlserverd_request_seconds_total counter\n");
  for (int r = 0; r < TL_ROUTE_COUNT_; r++)
    tl_srv_buf_printf(b, "tlserverd_request_seconds_total{route=\"%s\"} %.6f\n", route_names[r],
                      (double)GET(m->request_us[r]) / 1e6);
  tl_srv_buf_puts(b, "# HELP tlserverd_response_bytes_total Bytes of response bodies, by route.\n"
                     "# TYPE tlserverd_response_bytes_total counter\n");
  for (int r = 0; r < TL_ROUTE_COUNT_; r++)
    tl_srv_buf_printf(b, "tlserverd_response_bytes_total{route=\"%s\"} %lld\n", route_names[r],
                      GET(m->response_bytes[r]));
  counter(b, "tlserverd_artifact_bytes_served_total",
          "Artifact bytes sent in GET answers (200 and 206).", GET(m->artifact_bytes));

  /* cache */
  counter(b, "tlserverd_cache_hits_total",
          "Build lookups of compile requests answered from the cache.", GET(m->cache_hits));
  counter(b, "tlserverd_cache_misses_total",
          "Build lookups of compile requests not in the cache.", GET(m->cache_misses));
  tl_srv_buf_puts(b, "# HELP tlserverd_artifact_lookups_total Artifact GETs by where the bytes "
                     "came from.\n# TYPE tlserverd_artifact_lookups_total counter\n");
  tl_srv_buf_printf(b, "tlserverd_artifact_lookups_total{result=\"memory\"} %lld\n",
                    GET(m->artifact_mem_hits));
  tl_srv_buf_printf(b, "tlserverd_artifact_lookups_total{result=\"database\"} %lld\n",
                    GET(m->artifact_db_hits));
  tl_srv_buf_printf(b, "tlserverd_artifact_lookups_total{result=\"miss\"} %lld\n",
                    GET(m->artifact_misses));
  counter(b, "tlserverd_cache_evictions_total",
          "Builds evicted by this server to keep the cache under --cache-max-bytes.",
          GET(m->evictions));
  counter(b, "tlserverd_cache_publish_failures_total",
          "Compiled builds that could not be stored.", GET(m->publish_failures));
  if (x->cache) {
    gauge(b, "tlserverd_cache_bytes", "Bytes of artifacts in the cache database.",
          (double)x->cache->bytes);
    gauge(b, "tlserverd_cache_artifacts", "Artifacts in the cache database.",
          (double)x->cache->artifacts);
    gauge(b, "tlserverd_cache_builds", "Builds in the cache database.",
          (double)x->cache->builds);
    counter(b, "tlserverd_cache_integrity_failures_total",
            "Artifacts whose bytes did not match their id when read (all processes using the "
            "database; they were deleted).",
            x->cache->integrity_failures);
    counter(b, "tlserverd_cache_db_evictions_total",
            "Builds evicted from the database by any process.", x->cache->evictions);
  }
  gauge(b, "tlserverd_memory_cache_bytes", "Bytes of artifacts held in memory.",
        (double)x->memory_cache_bytes);
  gauge(b, "tlserverd_memory_cache_entries", "Artifacts held in memory.",
        (double)x->memory_cache_entries);

  /* the shared tier (tier.c) */
  if (x->tier_primaries > 0) {
    gauge(b, "tlserverd_tier_primaries", "Redis primaries of the shared tier (--tier).",
          x->tier_primaries);
    gauge(b, "tlserverd_tier_primaries_up",
          "Primaries whose last call succeeded (the others are skipped: local cache only).",
          x->tier_up);
  }
  counter(b, "tlserverd_tier_hits_total",
          "Local misses found in the shared tier (checked, then stored locally).",
          GET(m->tier_hits));
  counter(b, "tlserverd_tier_misses_total", "Local misses not in the shared tier.",
          GET(m->tier_misses));
  counter(b, "tlserverd_tier_errors_total",
          "Redis calls that failed or timed out (the request went on without the tier).",
          GET(m->tier_errors));
  counter(b, "tlserverd_tier_corrupt_total",
          "Tier entries that failed their hash check (deleted there and rebuilt).",
          GET(m->tier_corrupt));
  counter(b, "tlserverd_tier_publishes_total", "Builds written to the shared tier.",
          GET(m->tier_publishes));
  counter(b, "tlserverd_tier_too_large_total",
          "Builds over --tier-max-entry, kept in the local cache only.", GET(m->tier_too_large));
  counter(b, "tlserverd_tier_lease_waits_total",
          "Misses that waited for the compile of the replica holding the key's lease.",
          GET(m->tier_lease_waits));
  counter(b, "tlserverd_tier_takeovers_total",
          "Leases taken over after their holder's expired (the holder died or hung).",
          GET(m->tier_takeovers));
  counter(b, "tlserverd_tier_wait_timeouts_total",
          "Waits for another replica's compile that outlasted --compile-timeout (compiled "
          "here without a lease).",
          GET(m->tier_wait_timeouts));

  /* compiles */
  tl_srv_buf_puts(b, "# HELP tlserverd_compiles_total Compiles run in worker processes, by "
                     "outcome.\n# TYPE tlserverd_compiles_total counter\n");
  for (int o = 0; o < TL_COMPILE_OUTCOME_COUNT_; o++)
    tl_srv_buf_printf(b, "tlserverd_compiles_total{outcome=\"%s\"} %lld\n", outcome_names[o],
                      GET(m->compiles[o]));
  tl_srv_buf_puts(b, "# HELP tlserverd_status_sources_total Sources generated again in worker processes for "
                     "/status/builds/KEY/source, by outcome.\n# TYPE tlserverd_status_sources_total counter\n");
  for (int o = 0; o < TL_COMPILE_OUTCOME_COUNT_; o++)
    tl_srv_buf_printf(b, "tlserverd_status_sources_total{outcome=\"%s\"} %lld\n", outcome_names[o],
                      GET(m->sources[o]));
  tl_srv_buf_puts(b, "# HELP tlserverd_compile_seconds Wall time of compiles in worker processes.\n"
                     "# TYPE tlserverd_compile_seconds histogram\n");
  long long cum = 0;
  for (int i = 0; i <= TL_SRV_COMPILE_BUCKETS; i++) {
    cum += GET(m->compile_bucket[i]);
    if (i < TL_SRV_COMPILE_BUCKETS)
      tl_srv_buf_printf(b, "tlserverd_compile_seconds_bucket{le=\"%g\"} %lld\n",
                        compile_buckets[i], cum);
    else
      tl_srv_buf_printf(b, "tlserverd_compile_seconds_bucket{le=\"+Inf\"} %lld\n", cum);
  }
  tl_srv_buf_printf(b, "tlserverd_compile_seconds_sum %.6f\ntlserverd_compile_seconds_count %lld\n",
                    (double)GET(m->compile_us_sum) / 1e6, cum);
  counter(b, "tlserverd_singleflight_joins_total",
          "Compile requests that waited for an identical compile already in flight.",
          GET(m->singleflight_joins));
  counter(b, "tlserverd_queued_cache_hits_total",
          "Queued compiles found in the cache when a worker took them (no compile needed).",
          GET(m->rechecked_hits));
  counter(b, "tlserverd_overloaded_total", "Compile requests refused because the queue was full.",
          GET(m->overloaded));
  counter(b, "tlserverd_client_limited_total",
          "Compile requests refused with 429: their client had --max-compiles-per-client in flight.",
          GET(m->client_limited));
  counter(b, "tlserverd_worker_spawns_total", "Compile worker processes started.",
          GET(m->worker_spawns));
  gauge(b, "tlserverd_compile_queue_depth", "Compiles waiting for a worker.",
        (double)GET(m->queue_depth));
  gauge(b, "tlserverd_compile_queue_capacity", "The --queue limit.", x->queue_capacity);
  gauge(b, "tlserverd_compiles_running", "Compiles running in workers.",
        (double)GET(m->compiles_running));
  gauge(b, "tlserverd_compile_workers", "The --workers limit.", x->workers);
  gauge(b, "tlserverd_connections_waiting", "Connections waiting for a compile.",
        (double)GET(m->connections_suspended));
  gauge(b, "tlserverd_request_body_bytes",
        "Bytes of request bodies held or reserved now (limit: --max-body-total).",
        (double)GET(m->body_bytes));
  counter(b, "tlserverd_request_bodies_refused_total",
          "Requests refused with 503 because --max-body-total was reached.",
          GET(m->bodies_refused));
  tl_srv_buf_puts(b, "# HELP tlserverd_connections_cut_total Connections closed by the server "
                     "past a deadline (--header-timeout or, under pressure, --pressure-timeout: "
                     "head; --body-timeout: body; the idle time-out plus the header time-out, or "
                     "under pressure --pressure-timeout: idle), half-closed by the client, or "
                     "whose body fell behind --min-body-rate under pressure (body_rate), or whose body "
                     "was the slowest when another request needed room in --max-body-total "
                     "(body_budget).\n"
                     "# TYPE tlserverd_connections_cut_total counter\n");
  for (int p = 0; p < TL_CONN_CUT_COUNT_; p++)
    if (p != TL_CONN_BUSY)
      tl_srv_buf_printf(b, "tlserverd_connections_cut_total{reason=\"%s\"} %lld\n",
                        p < TL_CONN_PHASE_COUNT_       ? tl_srv_conn_phase_name(p)
                        : p == TL_CONN_CUT_HALF_CLOSED ? "half_closed"
                        : p == TL_CONN_CUT_BODY_RATE   ? "body_rate"
                                                       : "body_budget",
                        GET(m->connections_cut[p]));
}
