/* SPDX-License-Identifier: MIT */
/* bootid: which boot of the node this is (see bootid.h). */
#include "dra/bootid.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

#define BOOT_ID_FILE "/proc/sys/kernel/random/boot_id"

/* At most len - 1 bytes of path (O_NONBLOCK: never stuck on a FIFO). */
static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        return -errno;
    }
    ssize_t n;
    do {
        n = read(fd, buf, len - 1);
    } while (n < 0 && errno == EINTR);
    int err = n < 0 ? -errno : 0;
    close(fd);
    if (err < 0) {
        return err;
    }
    buf[n] = '\0';
    return 0;
}

int kdp__bootid_read(char out[KDP__DRA_BOOT_ID_LEN])
{
    const char *env = getenv(KDP__BOOT_ID_ENV);
    const char *path = env && *env ? env : BOOT_ID_FILE;
    char buf[64] = "";
    out[0] = '\0';
    int err = read_small(path, buf, sizeof(buf));
    size_t n = 0;
    if (err == 0) {
        while (buf[n] && (isxdigit((unsigned char)buf[n]) || buf[n] == '-') &&
               n < KDP__DRA_BOOT_ID_LEN - 1) {
            n++;
        }
        err = n >= 32 && (buf[n] == '\0' || buf[n] == '\n') ? 0 : -EBADMSG;
    }
    if (err < 0) {
        static atomic_int logged;
        if (atomic_exchange(&logged, 1) == 0) {
            log_warn("cannot read the boot ID from %s (%s): claims prepared before a reboot "
                     "cannot be told apart",
                     path, strerror(-err));
        }
        return err;
    }
    memcpy(out, buf, n);
    out[n] = '\0';
    return 0;
}

int64_t kdp__bootid_btime(void)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f) {
        return 0;
    }
    char line[256];
    long long t = 0;
    while (t == 0 && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "btime ", 6) == 0) {
            char *end = NULL;
            errno = 0;
            t = strtoll(line + 6, &end, 10);
            t = errno == 0 && end != line + 6 ? t : 0;
        }
    }
    fclose(f);
    return t > 0 ? (int64_t)t : 0;
}
