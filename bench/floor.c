/* SPDX-License-Identifier: MIT */
/*
 * kdp-bench-floor: the physical floor under every RPC figure. A parent and a
 * forked child exchange a small request and response over a connected
 * AF_UNIX stream socket pair (blocking read/write: no HTTP/2, no protobuf, no
 * event loop), N times; prints the round-trip percentiles as JSON.
 *
 *   kdp-bench-floor [-n N] [-size BYTES] [-cpu-client C] [-cpu-server S]
 *
 * -cpu-* pin each side to one CPU (-1 = not pinned): the same CPU measures
 * the same-core round trip (two context switches), two CPUs the cross-core
 * one (two wakeups of a sleeping task on another core).
 *
 *   kdp-bench-floor -register KUBELET_SOCK
 *
 * The floor under exec -> Register: connects to KUBELET_SOCK at once and
 * writes a canned HTTP/2 Register call (preface, SETTINGS, HEADERS, DATA;
 * endpoint "floor.sock", resource "example.com/floor"), built by hand: no
 * event loop, no HTTP/2 or protobuf library, no devices to list. Then it
 * lingers 200 ms (so the kubelet reads it all) and exits.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int pin(int cpu)
{
    if (cpu < 0) {
        return 0;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set);
}

static int full_io(int fd, char *buf, size_t n, int wr)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = wr ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
        if (r <= 0) {
            return -1;
        }
        done += (size_t)r;
    }
    return 0;
}

/* Appends an HTTP/2 frame header. */
static size_t frame(unsigned char *p, size_t len, int type, int flags, unsigned stream)
{
    p[0] = (unsigned char)(len >> 16);
    p[1] = (unsigned char)(len >> 8);
    p[2] = (unsigned char)len;
    p[3] = (unsigned char)type;
    p[4] = (unsigned char)flags;
    p[5] = (unsigned char)(stream >> 24);
    p[6] = (unsigned char)(stream >> 16);
    p[7] = (unsigned char)(stream >> 8);
    p[8] = (unsigned char)stream;
    return 9;
}

/* HPACK "literal header field without indexing, new name" (names and values
 * under 127 bytes). */
static size_t hpack(unsigned char *p, const char *name, const char *value)
{
    size_t n = strlen(name);
    size_t v = strlen(value);
    p[0] = 0x00;
    p[1] = (unsigned char)n;
    memcpy(p + 2, name, n);
    p[2 + n] = (unsigned char)v;
    memcpy(p + 3 + n, value, v);
    return 3 + n + v;
}

static size_t pb_string(unsigned char *p, int field, const char *s)
{
    size_t n = strlen(s);
    p[0] = (unsigned char)(field << 3 | 2);
    p[1] = (unsigned char)n;
    memcpy(p + 2, s, n);
    return 2 + n;
}

static int canned_register(const char *path)
{
    unsigned char buf[1024];
    size_t o = 0;
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    memcpy(buf, preface, sizeof(preface) - 1);
    o += sizeof(preface) - 1;
    o += frame(buf + o, 0, 0x4, 0, 0); /* SETTINGS, none */
    unsigned char hb[512];
    size_t h = 0;
    h += hpack(hb + h, ":method", "POST");
    h += hpack(hb + h, ":scheme", "http");
    h += hpack(hb + h, ":path", "/v1beta1.Registration/Register");
    h += hpack(hb + h, ":authority", "localhost");
    h += hpack(hb + h, "content-type", "application/grpc");
    h += hpack(hb + h, "te", "trailers");
    o += frame(buf + o, h, 0x1, 0x4, 1); /* HEADERS, END_HEADERS */
    memcpy(buf + o, hb, h);
    o += h;
    unsigned char msg[128];
    size_t m = 0;
    m += pb_string(msg + m, 1, "v1beta1");
    m += pb_string(msg + m, 2, "floor.sock");
    m += pb_string(msg + m, 3, "example.com/floor");
    o += frame(buf + o, 5 + m, 0x0, 0x1, 1); /* DATA, END_STREAM */
    buf[o++] = 0;                            /* not compressed */
    buf[o++] = 0;
    buf[o++] = 0;
    buf[o++] = 0;
    buf[o++] = (unsigned char)m;
    memcpy(buf + o, msg, m);
    o += m;

    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return 2;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        full_io(fd, (char *)buf, o, 1) < 0) {
        perror("floor: register");
        return 1;
    }
    usleep(200000);
    close(fd);
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    long n = 10000;
    long size = 64;
    int cpu_c = -1;
    int cpu_s = -1;
    if (argc == 3 && strcmp(argv[1], "-register") == 0) {
        return canned_register(argv[2]);
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-n") == 0) {
            n = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "-size") == 0) {
            size = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "-cpu-client") == 0) {
            cpu_c = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "-cpu-server") == 0) {
            cpu_s = atoi(argv[i + 1]);
        } else {
            fprintf(stderr, "usage: %s [-n N] [-size BYTES] [-cpu-client C] [-cpu-server S]\n",
                    argv[0]);
            return 2;
        }
    }
    if (n <= 0 || size <= 0 || size > 65536) {
        fprintf(stderr, "floor: bad -n or -size\n");
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }
    char *buf = calloc(1, (size_t)size);
    double *lat = calloc((size_t)n, sizeof(*lat));
    if (!buf || !lat) {
        return 1;
    }
    long warm = n / 10 + 10;
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) { /* server: echo every request */
        close(sv[0]);
        if (pin(cpu_s) < 0) {
            perror("sched_setaffinity");
            _exit(1);
        }
        while (full_io(sv[1], buf, (size_t)size, 0) == 0 &&
               full_io(sv[1], buf, (size_t)size, 1) == 0) {
        }
        _exit(0);
    }
    close(sv[1]);
    if (pin(cpu_c) < 0) {
        perror("sched_setaffinity");
        return 1;
    }
    for (long i = -warm; i < n; i++) {
        double t0 = now_us();
        if (full_io(sv[0], buf, (size_t)size, 1) < 0 || full_io(sv[0], buf, (size_t)size, 0) < 0) {
            fprintf(stderr, "floor: the server went away\n");
            return 1;
        }
        if (i >= 0) {
            lat[i] = now_us() - t0;
        }
    }
    close(sv[0]);
    waitpid(pid, NULL, 0);
    qsort(lat, (size_t)n, sizeof(*lat), cmp_d);
    printf("{\"n\": %ld, \"size\": %ld, \"cpu_client\": %d, \"cpu_server\": %d, "
           "\"p50\": %.2f, \"p90\": %.2f, \"p99\": %.2f, \"min\": %.2f}\n",
           n, size, cpu_c, cpu_s, lat[n / 2], lat[n * 9 / 10], lat[n * 99 / 100], lat[0]);
    free(lat);
    free(buf);
    return 0;
}
