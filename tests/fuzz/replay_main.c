/*
 * replay_main.c - runs the fuzz target (fuzz_check.c) on saved inputs,
 * without libFuzzer, so that `make test` replays the corpus in every build
 * (sanitizer builds included).
 *
 *   fuzz_replay PATH...
 *
 * Each PATH is a file (one input) or a directory (every regular file in it,
 * not recursing, in name order; names starting with '.' are skipped).
 * Prints "fuzz_replay: N inputs ran" at the end.  Exit status 0, or 1 when
 * a path cannot be read or no path is given (a crash ends it by signal).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT (16u << 20)

/* Runs one file; returns false when it cannot be read. */
static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
    return 0;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    fprintf(stderr, "fuzz_replay: out of memory\n");
    return 0;
  }
  for (;;) {
    if (n == cap) {
      if (cap >= REPLAY_MAX_INPUT) {
        fprintf(stderr, "fuzz_replay: %s: larger than %u bytes\n", path, REPLAY_MAX_INPUT);
        free(buf);
        fclose(f);
        return 0;
      }
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        fclose(f);
        fprintf(stderr, "fuzz_replay: out of memory\n");
        return 0;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  int ok = !ferror(f);
  fclose(f);
  if (!ok) {
    fprintf(stderr, "fuzz_replay: %s: read error\n", path);
    free(buf);
    return 0;
  }
  /* a copy of exactly n bytes, so that reading past the end is caught */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    fprintf(stderr, "fuzz_replay: out of memory\n");
    return 0;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int skip_dot(const struct dirent *d) { return d->d_name[0] != '.'; }

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fuzz_replay FILE_OR_DIRECTORY...\n");
    return 1;
  }
  long count = 0;
  int failed = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "fuzz_replay: %s: %s\n", argv[i], strerror(errno));
      failed = 1;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[i]))
        count++;
      else
        failed = 1;
      continue;
    }
    struct dirent **list;
    int n = scandir(argv[i], &list, skip_dot, by_name);
    if (n < 0) {
      fprintf(stderr, "fuzz_replay: %s: %s\n", argv[i], strerror(errno));
      failed = 1;
      continue;
    }
    for (int k = 0; k < n; k++) {
      size_t len = strlen(argv[i]) + 1 + strlen(list[k]->d_name) + 1;
      char *path = malloc(len);
      if (!path) {
        fprintf(stderr, "fuzz_replay: out of memory\n");
        return 1;
      }
      snprintf(path, len, "%s/%s", argv[i], list[k]->d_name);
      struct stat fs;
      if (stat(path, &fs) == 0 && S_ISREG(fs.st_mode)) {
        if (run_file(path))
          count++;
        else
          failed = 1;
      }
      free(path);
      free(list[k]);
    }
    free(list);
  }
  printf("fuzz_replay: %ld inputs ran\n", count);
  return failed;
}
