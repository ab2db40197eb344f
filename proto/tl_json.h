/*
 * tl_json.h - the canonical JSON of build keys and request keys, one
 * routine for the compiler (the build key's manifest, compiler/compile.c)
 * and the client (its request key, client/fetch.c), so that the two can
 * never disagree about what "the same program" is (proto/kernel-meta.md
 * section 4).
 *
 * Canonical text: jansson's json_dumps with JSON_COMPACT | JSON_SORT_KEYS |
 * JSON_ENSURE_ASCII | JSON_ENCODE_ANY and 17 significant digits for reals:
 * no whitespace outside strings, object keys sorted, non-ASCII characters as
 * \uXXXX escapes.  Members whose name starts with "x-" never change a build
 * and are removed (tl_json_strip_x) before a program is written.  Link with
 * -ljansson.
 */
#ifndef TL_JSON_H
#define TL_JSON_H

#include <jansson.h>

/* The canonical text of v (any JSON value), malloc'd (free()); NULL when
 * out of memory. */
char *tl_json_canonical(const json_t *v);

/* Removes, at any depth, every object member whose name starts with "x-". */
void tl_json_strip_x(json_t *v);

#endif
