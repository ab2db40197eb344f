/*
 * handles.c - a pool of tl_cache handles on one database file.
 *
 * A tl_cache handle must be used by one thread at a time, and the HTTP
 * handlers run on any of libmicrohttpd's threads, so a handler borrows a
 * handle for the duration of its request and gives it back.  Handles are
 * opened on demand (there are never more than threads that used the cache
 * at once) and all closed together at shutdown, which also writes their
 * batched access times.
 */
#include <stdlib.h>
#include <string.h>
#include "server.h"

struct tl_srv_handles {
  pthread_mutex_t mu;
  char *path;
  tl_cache_options opts;
  tl_cache **free_list;
  int nfree, cap, open;
};

tl_status tl_srv_handles_new(const char *path, const tl_cache_options *opts, tl_srv_handles **out,
                             tl_error *err) {
  *out = NULL;
  tl_srv_handles *h = calloc(1, sizeof *h);
  if (!h || !(h->path = strdup(path))) {
    free(h);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  if (opts)
    h->opts = *opts;
  pthread_mutex_init(&h->mu, NULL);
  /* Open one now, so that a bad path fails at start, not at the first request. */
  tl_cache *c = tl_srv_handles_get(h, err);
  if (!c) {
    tl_srv_handles_free(h);
    return err ? err->code : TL_IO;
  }
  tl_srv_handles_put(h, c);
  *out = h;
  return TL_OK;
}

tl_cache *tl_srv_handles_get(tl_srv_handles *h, tl_error *err) {
  pthread_mutex_lock(&h->mu);
  if (h->nfree > 0) {
    tl_cache *c = h->free_list[--h->nfree];
    pthread_mutex_unlock(&h->mu);
    return c;
  }
  pthread_mutex_unlock(&h->mu);
  tl_cache *c = NULL;
  if (tl_cache_open(h->path, &h->opts, &c, err) != TL_OK)
    return NULL;
  pthread_mutex_lock(&h->mu);
  h->open++;
  pthread_mutex_unlock(&h->mu);
  return c;
}

void tl_srv_handles_put(tl_srv_handles *h, tl_cache *c) {
  if (!c)
    return;
  pthread_mutex_lock(&h->mu);
  if (h->nfree == h->cap) {
    int nc = h->cap ? h->cap * 2 : 8;
    tl_cache **nl = realloc(h->free_list, (size_t)nc * sizeof *nl);
    if (!nl) {
      /* cannot keep it: close it instead */
      h->open--;
      pthread_mutex_unlock(&h->mu);
      tl_cache_close(c);
      return;
    }
    h->free_list = nl;
    h->cap = nc;
  }
  h->free_list[h->nfree++] = c;
  pthread_mutex_unlock(&h->mu);
}

void tl_srv_handles_free(tl_srv_handles *h) {
  if (!h)
    return;
  for (int i = 0; i < h->nfree; i++)
    tl_cache_close(h->free_list[i]);
  free(h->free_list);
  free(h->path);
  pthread_mutex_destroy(&h->mu);
  free(h);
}
