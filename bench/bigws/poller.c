/*
 * bench/bigws's open-loop poller in C (bench/bigws/poller.ts is the same client in Node): poll i
 * of the small feed is due at t0 + i / rate, whatever the answers before it did, until SIGUSR1.
 * Written in C because the Node client's own lateness was the p99.9 it measured: its event loop,
 * its garbage collector and undici's per-request work sent 1 poll in 1,000 2–25 ms late on this
 * VM while a real-time wake-up probe beside it was late by 0.06–0.12 ms (bench/NOTES.md, "bigws,
 * and a short scheduler slice for the front-end threads"). This one allocates nothing after its
 * warm-up, sleeps to absolute deadlines (epoll_pwait2) and reads only the status line and the
 * body's length (Content-Length, or chunks).
 *
 * usage: poller PORT API_KEY RATE OUT_FILE [CONNECTIONS]
 * Prints "ready" once its connections are open and warm. On SIGUSR1 it stops sending, waits for
 * the polls in flight (10 s at most: those still out count as errors), writes OUT_FILE and prints
 * "done". OUT_FILE: a little-endian uint64 count n, an int64 error count, then n records of three
 * float64 — the scheduled send time (ms since the epoch), the latency from it and how late the
 * request was written (ms). A poll that is due while every connection waits for an answer is
 * written when one is free; its lateness counts in both.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256
#define BUF_SIZE 65536
#define WARMUP_ROUNDS 20

struct conn {
  int fd;
  int busy;
  double scheduled; /* ns, CLOCK_MONOTONIC */
  double lag;       /* ns */
  size_t have;
  char buf[BUF_SIZE];
};

static struct conn conns[MAX_CONNS];
static int nconns = 32;
static int epfd;
static struct sockaddr_in addr;
static char request[4096];
static size_t request_len;
static volatile sig_atomic_t stopping = 0;

/* Polls due while no connection was free, oldest first (their scheduled times). */
static double *pending;
static size_t pending_head, pending_tail, pending_cap;

static double *out;
static size_t done_n, out_cap;
static int64_t errors;
static double epoch_offset_ms; /* realtime ms − monotonic ms */

static double now_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die (const char *what) {
  perror(what);
  exit(2);
}

static void on_stop (int sig) {
  (void)sig;
  stopping = 1;
}

static void open_conn (struct conn *c) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) die("connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
  c->fd = fd;
  c->busy = 0;
  c->have = 0;
}

static void reopen (struct conn *c) {
  epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  open_conn(c);
}

static void send_on (struct conn *c, double scheduled, double at) {
  c->busy = 1;
  c->scheduled = scheduled;
  c->lag = at - scheduled;
  c->have = 0;
  ssize_t w = send(c->fd, request, request_len, MSG_NOSIGNAL);
  if (w != (ssize_t)request_len) {
    errors++;
    reopen(c);
  }
}

static struct conn *free_conn (void) {
  for (int i = 0; i < nconns; i++) if (!conns[i].busy) return &conns[i];
  return NULL;
}

static void record (struct conn *c, int ok, double at) {
  if (!ok) { errors++; return; }
  if (done_n == out_cap) return; /* the buffer holds the whole run (see main); past it, dropped */
  double *r = out + 3 * done_n++;
  r[0] = epoch_offset_ms + c->scheduled / 1e6;
  r[1] = (at - c->scheduled) / 1e6;
  r[2] = c->lag / 1e6;
}

/* Where a chunked body that begins at `body` ends (just past its last chunk), or NULL while more
 * is to come; *bad is set if it cannot be read. */
static char *chunked_end (char *body, char *limit, int *bad) {
  for (char *p = body;;) {
    char *eol = memmem(p, (size_t)(limit - p), "\r\n", 2);
    if (eol == NULL) return NULL;
    char *after;
    long size = strtol(p, &after, 16);
    if (after == p || size < 0) { *bad = 1; return NULL; }
    if (size == 0) {
      char *trailer = memmem(eol, (size_t)(limit - eol), "\r\n\r\n", 4);
      return trailer == NULL ? NULL : trailer + 4;
    }
    if (limit - (eol + 2) < size + 2) return NULL;
    p = eol + 2 + size + 2;
  }
}

/* The answer in c->buf is whole: its length, or 0 while more is to come (-1: unreadable). */
static long whole_answer (struct conn *c, int *status) {
  c->buf[c->have] = 0;
  char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
  if (end == NULL) return c->have >= BUF_SIZE - 1 ? -1 : 0;
  if (c->have < 12 || strncmp(c->buf, "HTTP/1.1 ", 9) != 0) return -1;
  *status = atoi(c->buf + 9);
  char *body = end + 4;
  long length = -1;
  int chunked = 0;
  for (char *line = strstr(c->buf, "\r\n"); line != NULL && line < end; line = strstr(line + 2, "\r\n")) {
    if (strncasecmp(line + 2, "content-length:", 15) == 0) length = strtol(line + 17, NULL, 10);
    else if (strncasecmp(line + 2, "transfer-encoding:", 18) == 0) chunked = 1;
  }
  if (*status == 204 || *status == 304 || (*status >= 100 && *status < 200)) length = 0;
  if (chunked && length != 0) {
    int bad = 0;
    char *last = chunked_end(body, c->buf + c->have, &bad);
    if (bad) return -1;
    if (last == NULL) return c->have >= BUF_SIZE - 1 ? -1 : 0;
    return last - c->buf;
  }
  if (length < 0) return -1;
  long total = (body - c->buf) + length;
  if (total >= BUF_SIZE) return -1;
  return (long)c->have >= total ? total : 0;
}

/* Reads what c has; when its answer is whole, records it and frees c. Returns 1 if c was freed. */
static int on_readable (struct conn *c, int warm) {
  ssize_t r = recv(c->fd, c->buf + c->have, BUF_SIZE - 1 - c->have, 0);
  double at = now_ns();
  if (r <= 0) {
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (c->busy && !warm) errors++;
    reopen(c);
    return 1;
  }
  c->have += (size_t)r;
  int status = 0;
  long total = whole_answer(c, &status);
  if (total == 0) return 0;
  if (!warm) record(c, total > 0 && status == 200, at);
  if (total < 0) { reopen(c); return 1; }
  c->busy = 0;
  c->have = 0;
  return 1;
}

static void push_pending (double scheduled) {
  if (pending_tail - pending_head == pending_cap) { errors++; return; }
  pending[pending_tail++ % pending_cap] = scheduled;
}

int main (int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s PORT API_KEY RATE OUT_FILE [CONNECTIONS]\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]);
  const char *key = argv[2];
  double rate = atof(argv[3]);
  const char *out_file = argv[4];
  if (argc > 5) nconns = atoi(argv[5]);
  if (port <= 0 || rate <= 0 || nconns < 1 || nconns > MAX_CONNS) {
    fprintf(stderr, "poller: bad arguments\n");
    return 2;
  }
  request_len = (size_t)snprintf(request, sizeof request, "GET /v1/threat/feeds HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n\r\n", port, key);
  if (request_len >= sizeof request) return 2;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  /* Room for an hour of polls and a second's worth pending, touched now: no page fault later. */
  out_cap = (size_t)(rate * 3600);
  out = malloc(out_cap * 3 * sizeof(double));
  pending_cap = (size_t)rate + 1;
  pending = malloc(pending_cap * sizeof(double));
  if (out == NULL || pending == NULL) die("malloc");
  memset(out, 0, out_cap * 3 * sizeof(double));
  memset(pending, 0, pending_cap * sizeof(double));
  mlockall(MCL_CURRENT | MCL_FUTURE); /* best effort: needs CAP_IPC_LOCK or a high enough limit */

  struct sigaction sa = { 0 };
  sa.sa_handler = on_stop;
  sigaction(SIGUSR1, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) die("epoll_create1");
  for (int i = 0; i < nconns; i++) open_conn(&conns[i]);

  struct epoll_event events[MAX_CONNS];
  /* Warm-up, closed loop: every connection polls WARMUP_ROUNDS times, answers not recorded. */
  for (int round = 0; round < WARMUP_ROUNDS; round++) {
    for (int i = 0; i < nconns; i++) send_on(&conns[i], now_ns(), now_ns());
    int out_left = nconns;
    while (out_left > 0) {
      int n = epoll_wait(epfd, events, MAX_CONNS, 10000);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) { fprintf(stderr, "poller: no answer in warm-up\n"); return 1; }
      for (int e = 0; e < n; e++) out_left -= on_readable(events[e].data.ptr, 1);
    }
  }
  errors = 0;

  struct timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  epoch_offset_ms = ((double)rt.tv_sec * 1e3 + (double)rt.tv_nsec / 1e6) - ((double)mono.tv_sec * 1e3 + (double)mono.tv_nsec / 1e6);
  printf("ready\n");
  fflush(stdout);

  const double period = 1e9 / rate;
  const double t0 = now_ns();
  uint64_t sent = 0;
  double stop_at = 0;
  for (;;) {
    double now = now_ns();
    if (stopping && stop_at == 0) stop_at = now;
    if (!stopping) {
      for (; t0 + (double)sent * period <= now; sent++) {
        double scheduled = t0 + (double)sent * period;
        struct conn *c = pending_tail == pending_head ? free_conn() : NULL;
        if (c != NULL) send_on(c, scheduled, now);
        else push_pending(scheduled);
      }
    }
    int in_flight = 0;
    for (int i = 0; i < nconns; i++) in_flight += conns[i].busy;
    if (stopping && in_flight == 0 && pending_head == pending_tail) break;
    if (stopping && now - stop_at > 10e9) { errors += in_flight + (int64_t)(pending_tail - pending_head); break; }
    double next = stopping ? now + 100e6 : t0 + (double)sent * period;
    double wait = next - now_ns();
    struct timespec timeout = { 0, 0 };
    if (wait > 0) { timeout.tv_sec = (time_t)(wait / 1e9); timeout.tv_nsec = (long)(wait - (double)timeout.tv_sec * 1e9); }
    int n = epoll_pwait2(epfd, events, MAX_CONNS, &timeout, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_pwait2");
    }
    for (int e = 0; e < n; e++) {
      struct conn *c = events[e].data.ptr;
      if (on_readable(c, 0) && pending_head != pending_tail && !c->busy) {
        send_on(c, pending[pending_head++ % pending_cap], now_ns());
      }
    }
  }

  FILE *f = fopen(out_file, "wb");
  if (f == NULL) die("fopen");
  uint64_t count = done_n;
  if (fwrite(&count, sizeof count, 1, f) != 1 || fwrite(&errors, sizeof errors, 1, f) != 1 || fwrite(out, sizeof(double) * 3, done_n, f) != done_n || fclose(f) != 0) die("write");
  printf("done\n");
  fflush(stdout);
  return 0;
}
