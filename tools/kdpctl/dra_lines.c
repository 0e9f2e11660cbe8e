/* SPDX-License-Identifier: MIT */
/*
 * dra_lines: the commands of `kdpctl dra kubelet`, `dra apiserver` and
 * `dra run` read from stdin on the loop, one a line, each at most
 * KD_MAX_LINE bytes (a longer one is dropped and said so).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "dra.h"

static void on_input(kdp__io *io, uint32_t events, void *ud)
{
    (void)events;
    kd_lines *l = ud;
    char buf[4096];
    ssize_t n = read(kdp__io_fd(io), buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        kd_lines_stop(l); /* EOF: keep running until a signal or --timeout */
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            if (l->line.len < KD_MAX_LINE) {
                kc_buf_add(&l->line, &buf[i], 1);
            } else {
                l->dropped = true;
            }
            continue;
        }
        if (l->dropped) {
            l->fn(NULL, l->ud);
        } else if (l->line.len && !l->line.failed) {
            l->fn(l->line.s, l->ud);
        }
        l->dropped = false;
        kc_buf_reset(&l->line);
    }
}

int kd_lines_start(kd_lines *l, kdp__loop *loop, kd_line_fn fn, void *ud)
{
    l->fn = fn;
    l->ud = ud;
    int r = kdp__io_add(loop, STDIN_FILENO, 0x001 /* EPOLLIN */, on_input, l, &l->in);
    return r == -EPERM ? 0 : r; /* a regular file or /dev/null: no commands */
}

void kd_lines_stop(kd_lines *l)
{
    kdp__io_del(l->in);
    l->in = NULL;
    kc_buf_free(&l->line);
    l->dropped = false;
}

size_t kd_words(char *line, char **argv, size_t cap)
{
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(line, " \t\r", &save); tok;
         tok = strtok_r(NULL, " \t\r", &save)) {
        if (n == cap) {
            return cap + 1;
        }
        argv[n++] = tok;
    }
    return n;
}
