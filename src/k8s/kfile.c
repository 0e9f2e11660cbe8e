/* SPDX-License-Identifier: MIT */
/* kfile: a file read whole, base64 data (see kfile.h). */
#include "k8s/kfile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kdp__kfile_read(const char *path, char **ret, size_t *ret_len)
{
    /* links followed (a projected token is one); O_NONBLOCK and the
     * regular-file check below: a FIFO never holds the thread */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        return -errno;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > KDP__KFILE_MAX) {
        close(fd);
        return S_ISDIR(st.st_mode) ? -EISDIR : S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
    }
    size_t cap = (size_t)st.st_size + 1;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            int r = -errno;
            free(buf);
            close(fd);
            return r;
        }
        if (n == 0 || (len += (size_t)n) == cap - 1) {
            break;
        }
    }
    close(fd);
    buf[len] = '\0';
    *ret = buf;
    if (ret_len) {
        *ret_len = len;
    }
    return 0;
}

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int kdp__kfile_base64(const char *in, char **ret, size_t *ret_len)
{
    size_t n = strlen(in);
    char *out = malloc(n / 4 * 3 + 4);
    if (!out) {
        return -ENOMEM;
    }
    size_t len = 0;
    unsigned acc = 0;
    int bits = 0;
    bool pad = false;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        if (isspace((unsigned char)c)) {
            continue;
        }
        if (c == '=') {
            pad = true;
            continue;
        }
        int v = b64val(c);
        if (v < 0 || pad) {
            free(out);
            return -EINVAL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[len++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (bits >= 6) { /* a lone sixth of a byte: truncated */
        free(out);
        return -EINVAL;
    }
    out[len] = '\0';
    *ret = out;
    *ret_len = len;
    return 0;
}
