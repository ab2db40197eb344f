/*
 * tl_json.c - the canonical JSON of build keys and request keys
 * (tl_json.h).
 */
#include <string.h>
#include "tl_json.h"

char *tl_json_canonical(const json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
}

void tl_json_strip_x(json_t *v) {
  if (json_is_object(v)) {
    const char *key;
    json_t *x;
    void *tmp;
    json_object_foreach_safe(v, tmp, key, x) {
      if (strncmp(key, "x-", 2) == 0)
        json_object_del(v, key);
      else
        tl_json_strip_x(x);
    }
  } else if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) tl_json_strip_x(x);
  }
}
