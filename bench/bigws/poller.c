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
 *
 * usage: poller --fleet PORT API_KEY PATH APPLIANCES PERIOD_S ETAG OUT_FILE MAX_SECONDS
 * bench/fleet's appliances (fleet_main below): APPLIANCES connections, one an appliance, each
 * polling PATH every PERIOD_S from a random phase and keeping the ETag it last took (ETAG to
 * begin with), as a firewall would: `If-None-Match` in mode full, `since=` in mode delta, both
 * with `Accept-Encoding: gzip`. Bodies are counted, not kept.
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

static int fleet_main (int argc, char **argv);

int main (int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--fleet") == 0) return fleet_main(argc - 1, argv + 1);
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

/*
 * Fleet mode (bench/fleet). Each appliance is one connection with its own phase and its own ETag.
 * A poll due while the appliance's last one is still out (or its connection is still opening) is
 * written when it is free — latency from its scheduled time — and one due while another already
 * waits is skipped (counted), as a timer that does not stack runs would. A connection the server
 * closed while idle (uWS closes idle HTTP connections) is reopened at once; a poll whose
 * connection died before any byte of its answer is written again once on a fresh one, as HTTP
 * clients do for a request on a stale keep-alive connection.
 *
 * stdin: a line "full" or "delta" sets how later polls ask (answered "mode full" / "mode delta");
 * EOF or SIGUSR1 stops. OUT_FILE: little-endian uint64 n; int64 errors, skipped, retried,
 * reconnects, unsent (due at the stop, never written), dropped (past the record buffer); then n
 * records of 8 float64: scheduled send (ms since the epoch), latency from it (ms), send lag (ms),
 * status, bytes received (status line, headers and body), mode it was sent in (0 full, 1 delta),
 * answer (0 none, 1 full body, 2 delta body), and 1 if it was written again on a new connection.
 */
#define HEAD_SIZE 4096
#define ETAG_SIZE 160
#define FLEET_FIELDS 8

struct appliance {
  int fd;
  int connecting; /* connect() not yet complete */
  int busy;       /* a poll written, its answer not whole */
  int owed;       /* a poll due and not yet written */
  int retried;
  int status;
  int mode_sent;
  double scheduled, lag, owed_at; /* ns, CLOCK_MONOTONIC */
  size_t have;    /* bytes in head */
  long body_left; /* -1 until the head is whole */
  double bytes;
  char etag[ETAG_SIZE];
  char head[HEAD_SIZE];
};

static struct appliance *fleet;
static int fleet_n, fleet_mode, fleet_port;
static const char *fleet_path, *fleet_key;
static int64_t fleet_skipped, fleet_retried, fleet_reconnects, fleet_unsent, fleet_dropped, fleet_refused;
static char scratch[262144];

static void fleet_open (struct appliance *a) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  a->fd = fd;
  a->busy = 0;
  a->have = 0;
  a->body_left = -1;
  a->connecting = connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0;
  if (a->connecting && errno != EINPROGRESS) die("connect");
  struct epoll_event ev = { .events = EPOLLIN | (a->connecting ? EPOLLOUT : 0), .data.ptr = a };
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
}

static void fleet_reopen (struct appliance *a) {
  epoll_ctl(epfd, EPOLL_CTL_DEL, a->fd, NULL);
  close(a->fd);
  fleet_open(a);
}

/* The ETag as a query value: everything but unreserved characters percent-encoded. */
static void encode (char *to, const char *from) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)from; *p != 0; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') *to++ = (char)*p;
    else { *to++ = '%'; *to++ = hex[*p >> 4]; *to++ = hex[*p & 15]; }
  }
  *to = 0;
}

static void fleet_lost (struct appliance *a);

static void fleet_send (struct appliance *a, double scheduled, double at) {
  char req[2048], tag[3 * ETAG_SIZE];
  int n;
  if (a->etag[0] == 0) {
    n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\nAccept-Encoding: gzip\r\n\r\n", fleet_path, fleet_port, fleet_key);
  } else if (fleet_mode == 1) {
    encode(tag, a->etag);
    n = snprintf(req, sizeof req, "GET %s%ssince=%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\nAccept-Encoding: gzip\r\n\r\n", fleet_path, strchr(fleet_path, '?') != NULL ? "&" : "?", tag, fleet_port, fleet_key);
  } else {
    n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\nAccept-Encoding: gzip\r\nIf-None-Match: %s\r\n\r\n", fleet_path, fleet_port, fleet_key, a->etag);
  }
  a->busy = 1;
  a->owed = 0;
  a->scheduled = scheduled;
  a->lag = at - scheduled;
  a->have = 0;
  a->body_left = -1;
  a->bytes = 0;
  a->status = 0;
  a->mode_sent = fleet_mode;
  if (send(a->fd, req, (size_t)n, MSG_NOSIGNAL) != n) fleet_lost(a);
}

/* Writes what the appliance owes once it is connected and free. */
static void fleet_ready (struct appliance *a) {
  if (a->owed && !a->busy && !a->connecting && !stopping) fleet_send(a, a->owed_at, now_ns());
}

static void fleet_owe (struct appliance *a, double scheduled) {
  if (a->owed) { fleet_skipped++; return; }
  a->owed = 1;
  a->owed_at = scheduled;
}

/* The connection ended or failed: while idle, reopened; before any byte of an answer, the poll is
 * written again once on a new connection; otherwise the poll failed. */
static void fleet_lost (struct appliance *a) {
  int busy = a->busy;
  size_t have = a->have;
  fleet_reopen(a);
  if (!busy) fleet_reconnects++;
  else if (have == 0 && !a->retried) {
    a->retried = 1;
    fleet_retried++;
    a->owed = 0;
    fleet_owe(a, a->scheduled);
  } else {
    errors++;
    a->retried = 0;
  }
  fleet_ready(a);
}

/* A header's value in a whole head (NUL-terminated, `end` at its blank line), or NULL. */
static const char *header_value (const char *head, const char *end, const char *name, size_t *len) {
  size_t n = strlen(name);
  for (const char *line = strstr(head, "\r\n"); line != NULL && line < end; line = strstr(line + 2, "\r\n")) {
    if (strncasecmp(line + 2, name, n) != 0 || line[2 + n] != ':') continue;
    const char *v = line + 3 + n;
    while (*v == ' ' || *v == '\t') v++;
    *len = (size_t)(strstr(v, "\r\n") - v);
    return v;
  }
  return NULL;
}

static void fleet_done (struct appliance *a, double at, int warm) {
  char *end = memmem(a->head, a->have, "\r\n\r\n", 4);
  size_t len = 0;
  const char *delta = header_value(a->head, end, "x-feed-delta", &len);
  int kind = a->status != 200 ? 0 : delta != NULL && len == 5 && strncasecmp(delta, "delta", 5) == 0 ? 2 : 1;
  const char *etag = a->status == 200 ? header_value(a->head, end, "etag", &len) : NULL;
  if (etag != NULL && len < ETAG_SIZE) { memcpy(a->etag, etag, len); a->etag[len] = 0; }
  if (!warm) {
    if (done_n == out_cap) fleet_dropped++;
    else {
      double *r = out + FLEET_FIELDS * done_n++;
      r[0] = epoch_offset_ms + a->scheduled / 1e6;
      r[1] = (at - a->scheduled) / 1e6;
      r[2] = a->lag / 1e6;
      r[3] = a->status;
      r[4] = a->bytes;
      r[5] = a->mode_sent;
      r[6] = kind;
      r[7] = a->retried;
    }
  }
  a->busy = 0;
  a->retried = 0;
  a->have = 0;
  a->body_left = -1;
  fleet_ready(a);
}

/* Reads what the appliance's connection has: the head into `head`, the body counted and dropped. */
static void fleet_readable (struct appliance *a, int warm) {
  int head = a->body_left < 0;
  ssize_t r = head ? recv(a->fd, a->head + a->have, HEAD_SIZE - 1 - a->have, MSG_DONTWAIT) : recv(a->fd, scratch, sizeof scratch, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (r <= 0 || !a->busy) { fleet_lost(a); return; }
  double at = now_ns();
  a->bytes += (double)r;
  if (!head) a->body_left -= r;
  else {
    a->have += (size_t)r;
    a->head[a->have] = 0;
    char *end = memmem(a->head, a->have, "\r\n\r\n", 4);
    if (end == NULL) {
      if (a->have >= HEAD_SIZE - 1) { a->have = 1; fleet_lost(a); }
      return;
    }
    a->status = strncmp(a->head, "HTTP/1.1 ", 9) == 0 ? atoi(a->head + 9) : 0;
    size_t len = 0;
    const char *cl = header_value(a->head, end, "content-length", &len);
    long length = a->status == 304 ? 0 : cl != NULL ? strtol(cl, NULL, 10) : -1;
    /* Feed answers carry Content-Length; a chunked or unframed one counts as a failed poll. */
    if (length < 0 || header_value(a->head, end, "transfer-encoding", &len) != NULL) { a->have = 1; fleet_lost(a); return; }
    a->body_left = length - (long)(a->head + a->have - (end + 4));
  }
  if (a->body_left == 0) fleet_done(a, at, warm);
  else if (a->body_left < 0) { a->have = 1; fleet_lost(a); }
}

static void fleet_event (struct epoll_event *e, int warm) {
  struct appliance *a = e->data.ptr;
  if (!a->connecting) { fleet_readable(a, warm); return; }
  int err = 0;
  socklen_t l = sizeof err;
  getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &l);
  if (err != 0) {
    if (++fleet_refused > 10000) { fprintf(stderr, "poller: connections refused: %s\n", strerror(err)); exit(1); }
    fleet_reopen(a);
    return;
  }
  a->connecting = 0;
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = a };
  epoll_ctl(epfd, EPOLL_CTL_MOD, a->fd, &ev);
  fleet_ready(a);
}

/* "full" / "delta" lines from the bench; EOF stops. */
static void fleet_command (void) {
  static char line[64];
  static size_t have;
  ssize_t r = read(0, line + have, sizeof line - 1 - have);
  if (r <= 0) {
    stopping = 1;
    epoll_ctl(epfd, EPOLL_CTL_DEL, 0, NULL);
    return;
  }
  have += (size_t)r;
  char *eol;
  while ((eol = memchr(line, '\n', have)) != NULL) {
    *eol = 0;
    if (strcmp(line, "full") == 0 || strcmp(line, "delta") == 0) {
      fleet_mode = line[0] == 'd';
      printf("mode %s\n", line);
      fflush(stdout);
    }
    have -= (size_t)(eol + 1 - line);
    memmove(line, eol + 1, have);
  }
  if (have == sizeof line - 1) have = 0;
}

static double *fleet_phase;
static int by_phase (const void *x, const void *y) {
  double a = fleet_phase[*(const int *)x], b = fleet_phase[*(const int *)y];
  return a < b ? -1 : a > b;
}

static int fleet_main (int argc, char **argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: poller --fleet PORT API_KEY PATH APPLIANCES PERIOD_S ETAG OUT_FILE MAX_SECONDS\n");
    return 2;
  }
  fleet_port = atoi(argv[1]);
  fleet_key = argv[2];
  fleet_path = argv[3];
  fleet_n = atoi(argv[4]);
  const double period = atof(argv[5]) * 1e9;
  const char *etag = argv[6];
  const char *out_file = argv[7];
  const double max_s = atof(argv[8]);
  if (fleet_port <= 0 || fleet_n < 1 || period <= 0 || max_s <= 0 || strlen(etag) >= ETAG_SIZE || strlen(fleet_path) + strlen(fleet_key) > 1000) {
    fprintf(stderr, "poller: bad arguments\n");
    return 2;
  }
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)fleet_port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fleet = calloc((size_t)fleet_n, sizeof *fleet);
  fleet_phase = malloc((size_t)fleet_n * sizeof(double));
  int *order = malloc((size_t)fleet_n * sizeof(int));
  /* Every appliance polls once a period: room for the whole run and one period more. */
  out_cap = (size_t)((double)fleet_n * (max_s * 1e9 / period + 1)) + 1000;
  out = calloc(out_cap * FLEET_FIELDS, sizeof(double));
  if (fleet == NULL || fleet_phase == NULL || order == NULL || out == NULL) die("malloc");

  struct sigaction sa = { 0 };
  sa.sa_handler = on_stop;
  sigaction(SIGUSR1, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) die("epoll_create1");
  struct epoll_event in = { .events = EPOLLIN, .data.ptr = NULL };
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, 0, &in) != 0) die("epoll_ctl stdin");

  uint32_t seed = 0x9e3779b9u;
  for (int i = 0; i < fleet_n; i++) {
    seed ^= seed << 13; seed ^= seed >> 17; seed ^= seed << 5;
    fleet_phase[i] = period * ((double)seed / 4294967296.0);
    order[i] = i;
    strcpy(fleet[i].etag, etag);
  }
  qsort(order, (size_t)fleet_n, sizeof(int), by_phase);

  static struct epoll_event events[1024];
  /* Warm-up: every connection opened and served one conditional poll (a 304), not recorded. */
  const double warm_from = now_ns();
  for (int i = 0; i < fleet_n; i++) { fleet_open(&fleet[i]); fleet_owe(&fleet[i], warm_from); fleet_ready(&fleet[i]); }
  for (;;) {
    int left = 0;
    for (int i = 0; i < fleet_n; i++) left += fleet[i].busy || fleet[i].owed || fleet[i].connecting;
    if (left == 0) break;
    if (now_ns() - warm_from > 180e9) { fprintf(stderr, "poller: %d appliances not warm in 180 s\n", left); return 1; }
    int n = epoll_wait(epfd, events, 1024, 1000);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int e = 0; e < n; e++) if (events[e].data.ptr == NULL) fleet_command(); else fleet_event(&events[e], 1);
  }
  errors = fleet_skipped = fleet_retried = fleet_reconnects = fleet_refused = 0;
  struct timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  epoch_offset_ms = ((double)rt.tv_sec * 1e3 + (double)rt.tv_nsec / 1e6) - ((double)mono.tv_sec * 1e3 + (double)mono.tv_nsec / 1e6);
  printf("ready\n");
  fflush(stdout);

  const double t0 = now_ns();
  uint64_t due_i = 0; /* the next poll due: appliance order[due_i % n] in period due_i / n */
  double stop_at = 0;
  for (;;) {
    double now = now_ns();
    double next = 0;
    if (stopping && stop_at == 0) stop_at = now;
    if (!stopping) {
      for (;; due_i++) {
        int i = order[due_i % (uint64_t)fleet_n];
        next = t0 + fleet_phase[i] + (double)(due_i / (uint64_t)fleet_n) * period;
        if (next > now) break;
        struct appliance *a = &fleet[i];
        if (a->busy || a->connecting || a->owed) fleet_owe(a, next);
        else fleet_send(a, next, now);
      }
    } else {
      int busy = 0;
      for (int i = 0; i < fleet_n; i++) busy += fleet[i].busy;
      if (busy == 0) break;
      if (now - stop_at > 60e9) { errors += busy; break; }
      next = now + 100e6;
    }
    double wait = next - now_ns();
    struct timespec timeout = { 0, 0 };
    if (wait > 0) { timeout.tv_sec = (time_t)(wait / 1e9); timeout.tv_nsec = (long)(wait - (double)timeout.tv_sec * 1e9); }
    int n = epoll_pwait2(epfd, events, 1024, &timeout, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_pwait2");
    }
    for (int e = 0; e < n; e++) if (events[e].data.ptr == NULL) fleet_command(); else fleet_event(&events[e], 0);
  }
  for (int i = 0; i < fleet_n; i++) fleet_unsent += fleet[i].owed;

  FILE *f = fopen(out_file, "wb");
  if (f == NULL) die("fopen");
  uint64_t count = done_n;
  int64_t counts[6] = { errors, fleet_skipped, fleet_retried, fleet_reconnects, fleet_unsent, fleet_dropped };
  if (fwrite(&count, sizeof count, 1, f) != 1 || fwrite(counts, sizeof counts, 1, f) != 1 || fwrite(out, sizeof(double) * FLEET_FIELDS, done_n, f) != done_n || fclose(f) != 0) die("write");
  printf("done\n");
  fflush(stdout);
  return 0;
}
