/* SPDX-License-Identifier: MIT */
/*
 * A main() for a fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput
 * once on every file named (directories are walked), so ctest replays the
 * checked-in corpus in every build. Each input gets a buffer of its exact
 * size, as under libFuzzer, so ASan sees any overread.
 *
 *   replay_<target> FILE|DIR...
 *
 * Exit status: 0, or 1 if a file cannot be read or nothing was found (a
 * target that finds a bug abort()s or trips a sanitizer instead).
 */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned n_inputs;
static int failed;

static int run_file(const char *path, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        fprintf(stderr, "replay: %s: out of memory\n", path);
        return -1;
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f) || got != size;
    fclose(f);
    if (err) {
        free(buf);
        fprintf(stderr, "replay: %s: short read\n", path);
        return -1;
    }
    (void)LLVMFuzzerTestOneInput(buf, size);
    free(buf);
    n_inputs++;
    return 0;
}

static int visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type == FTW_F && S_ISREG(st->st_mode)) {
        if (run_file(path, (size_t)st->st_size) < 0) {
            failed = 1;
        }
    } else if (type == FTW_DNR || type == FTW_NS) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        failed = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (nftw(argv[i], visit, 16, FTW_PHYS) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            failed = 1;
        }
    }
    printf("replayed %u inputs\n", n_inputs);
    if (n_inputs == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    return failed;
}
