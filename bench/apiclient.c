/*
 * apiclient.c: a paced stream of HTTP commands, for bench/run's `api` scenario.
 * N HTTP/1.1 connections (--connections, default 1,000), connection k owning
 * session "<prefix>-<offset+k>", on plain non-blocking sockets and libev,
 * bound in turn to 127.0.0.2 ... 127.0.0.9 (--src-first, --src-last). An
 * answer that says `connection: close` (the server's every answer) has its
 * connection opened again at once, and the commands queued behind it go out
 * on the new one ("reopens"); a close without that header is a loss.
 *
 * Phases, as loadclient.c's: connect every connection, print `@ready {...}` on
 * stderr; on SIGUSR1 ("go") send --rate commands a second in all for --seconds
 * seconds, request i due at go + i/rate on connection i mod N, each
 *     POST /api/v1/sessions/<id>/commands HTTP/1.1
 *     Content-Type: application/json
 *     {"op":"start","seconds":60}   then   {"op":"cancel"}   then start ...
 * alternating per session, so that every command is accepted: one connection
 * per session and one request in flight per connection keep each session's
 * commands in order. A request whose slot comes while its connection still
 * waits for the last answer is queued behind it (counted in "queued").
 *
 * Each answer is read from its status line, headers and Content-Length (or a
 * chunked body). Two latencies per command, in log-linear histograms (~1.6 %):
 *   latency: from the request's write to the whole answer read;
 *   sched:   from the request's slot in the schedule to the answer (includes
 *            any wait behind the connection's previous command).
 * When every answer is in (or --drain seconds after the last slot) it prints
 * one JSON line on stdout, then keeps its connections open until SIGTERM.
 */
#define _GNU_SOURCE
#include "ev_client.h"

#define RESPONSE_MAX 16384
#define QUEUE_MAX 64

enum { A_IDLE, A_CONNECTING, A_READY, A_BUSY, A_CLOSED };

struct conn {
	ev_io io; /* first: the watcher's callback recovers the connection */
	int index, state, attempts;
	int next_op; /* 0 start, 1 cancel */
	long long t_sent, t_due;
	long long queue[QUEUE_MAX]; /* slots of the commands waiting behind the one in flight */
	int queued;
	int len;
	char buf[RESPONSE_MAX];
};

static struct ev_loop *loop;
static struct conn *conns;
static int n_conns = 1000, offset, port, max_pending = 1000, rate = 1000, run_seconds = 10;
static int start_seconds = 60, drain_s = 10;
static const char *host = "127.0.0.1", *prefix = "api", *token;
static struct sockaddr_in server_addr;

static int ready_reported, reported, pending, connected, conn_errors, next_to_connect;
static long long t_begin_us, t_go_us, t_last_answer_us;
static long long total_requests, scheduled, sent, answered, lost, acks_ok, queued_total, reconnects;
static long long reopens;
static long long protocol_errors, status_counts[600];
static char error_samples[512];
static int error_samples_len;
static unsigned long long lat_hist[HBUCKETS], sched_hist[HBUCKETS];
static long long lat_max_us, sched_max_us;
static double cpu_go;
static int going;
static ev_timer pump_timer, pace_timer, drain_timer;

static void report(void);
static void conn_io(struct ev_loop *l, ev_io *w, int revents);

static void check_ready(void)
{
	if (ready_reported || next_to_connect < n_conns || pending > 0)
		return;
	ready_reported = 1;
	fprintf(stderr, "@ready {\"connected\":%d,\"connect_errors\":%d,\"t_connect_ms\":%.3f}\n",
		connected, conn_errors, (now_us() - t_begin_us) / 1e3);
	fflush(stderr);
}

static void check_finished(void)
{
	if (going && !reported && scheduled == total_requests && answered + lost >= total_requests)
		report();
}

static void connect_one(struct conn *c)
{
	int fd = open_socket(&server_addr);
	c->attempts++;
	if (fd < 0) {
		conn_errors++;
		c->state = A_CLOSED;
		return;
	}
	c->state = A_CONNECTING;
	c->len = 0;
	pending++;
	ev_io_init(&c->io, conn_io, fd, EV_WRITE);
	ev_io_start(loop, &c->io);
}

static void send_command(struct conn *c, long long due)
{
	char body[64], req[768];
	int body_len = c->next_op ? snprintf(body, sizeof(body), "{\"op\":\"cancel\"}")
				  : snprintf(body, sizeof(body), "{\"op\":\"start\",\"seconds\":%d}",
					     start_seconds);
	char auth[320] = "";
	if (token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
	int n = snprintf(req, sizeof(req),
			 "POST /api/v1/sessions/%s-%d/commands HTTP/1.1\r\nHost: %s:%d\r\n"
			 "Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
			 prefix, c->index, host, port, body_len, auth, body);
	c->t_due = due;
	c->t_sent = now_us();
	c->state = A_BUSY;
	c->len = 0;
	sent++;
	if (write(c->io.fd, req, (size_t)n) != n) {
		/* A full socket buffer on an idle keep-alive connection: the peer is gone. */
		protocol_errors++;
		lost++;
		c->state = A_READY;
	}
}

/* The first command waiting behind a connection's last answer or its reopening. */
static void send_queued(struct conn *c)
{
	if (!c->queued)
		return;
	long long due = c->queue[0];
	memmove(c->queue, c->queue + 1, (size_t)--c->queued * sizeof(c->queue[0]));
	send_command(c, due);
}

/* The connection closed (or failed) with `in_flight` commands unanswered. */
static void conn_lost(struct conn *c)
{
	int in_flight = (c->state == A_BUSY) + c->queued;
	ev_io_stop(loop, &c->io);
	close(c->io.fd);
	if (c->state == A_CONNECTING) {
		pending--;
		conn_errors++;
	}
	if (c->state != A_CONNECTING)
		connected--;
	lost += in_flight;
	c->queued = 0;
	c->state = A_CLOSED;
	if (c->attempts < 5) {
		reconnects += ready_reported;
		connect_one(c);
	}
	check_ready();
	check_finished();
}

/* The start of the string value of "name" in a JSON object (whitespace allowed around the colon). */
static const char *string_value(const char *body, size_t len, const char *name)
{
	const char *end = body + len, *p = find_key(body, len, name, strlen(name));
	while (p && p < end && (*p == ' ' || *p == ':' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p && p < end && *p == '"' ? p + 1 : NULL;
}

static void note_error(const char *body, size_t len, int status)
{
	const char *code = string_value(body, len, "\"code\"");
	if (error_samples_len > (int)sizeof(error_samples) - 64)
		return;
	int n = 0;
	if (code)
		while (code + n < body + len && n < 32 && code[n] != '"' && code[n] >= ' ' && code[n] != '\\')
			n++;
	error_samples_len += snprintf(error_samples + error_samples_len,
				      sizeof(error_samples) - (size_t)error_samples_len, "%s\"%d %.*s\"",
				      error_samples_len ? "," : "", status, n, code ? code : "");
}

/* A whole answer is in c->buf[0..end): account it; more bytes than that are a protocol error. */
static void answer(struct conn *c, int status, const char *body, size_t body_len, int end,
		   int closing)
{
	long long t = now_us();
	long long lat = t - c->t_sent, sched = t - c->t_due;
	record_in(lat_hist, lat);
	record_in(sched_hist, sched);
	if (lat > lat_max_us)
		lat_max_us = lat;
	if (sched > sched_max_us)
		sched_max_us = sched;
	t_last_answer_us = t;
	answered++;
	status_counts[status > 0 && status < 600 ? status : 0]++;
	const char *type = string_value(body, body_len, "\"type\"");
	if (status == 200 && type && body + body_len - type > 4 && !memcmp(type, "ack\"", 4))
		acks_ok++;
	else
		note_error(body, body_len, status);
	if (status == 200)
		c->next_op ^= 1; /* a refused command left the session as it was */
	if (c->len > end)
		protocol_errors++;
	c->len = 0;
	c->state = A_READY;
	if (closing) {
		/* Announced: open the connection again; what is queued waits for it. */
		ev_io_stop(loop, &c->io);
		close(c->io.fd);
		connected--;
		reopens++;
		c->attempts = 0;
		connect_one(c);
		if (c->state == A_CLOSED) {
			lost += c->queued;
			c->queued = 0;
		}
		check_finished();
		return;
	}
	send_queued(c);
	check_finished();
}

/* Parses what c->buf holds; returns 1 once one answer was accounted. */
static int parse(struct conn *c)
{
	char *end = memmem(c->buf, (size_t)c->len, "\r\n\r\n", 4);
	if (!end)
		return 0;
	int head = (int)(end + 4 - c->buf);
	if (strncmp(c->buf, "HTTP/1.", 7) || c->len < 12) {
		protocol_errors++;
		conn_lost(c);
		return 1;
	}
	int status = atoi(c->buf + 9);
	const char *conn_hdr = header(c->buf, (size_t)head, "connection:");
	int closing = conn_hdr && !strncasecmp(conn_hdr, "close", 5);
	const char *te = header(c->buf, (size_t)head, "transfer-encoding:");
	if (te && !strncasecmp(te, "chunked", 7)) {
		/* One chunk and the last-chunk: enough for a small JSON answer. */
		char *last = memmem(c->buf + head, (size_t)(c->len - head), "\r\n0\r\n\r\n", 7);
		if (!last)
			return 0;
		char *data = memmem(c->buf + head, (size_t)(c->len - head), "\r\n", 2);
		data += 2;
		answer(c, status, data, (size_t)(last - data), (int)(last + 7 - c->buf), closing);
		return 1;
	}
	const char *cl = header(c->buf, (size_t)head, "content-length:");
	if (!cl) {
		protocol_errors++; /* neither length nor chunks: the answer ends at the close */
		conn_lost(c);
		return 1;
	}
	long long length = strtoll(cl, NULL, 10);
	if (length < 0 || length > RESPONSE_MAX - head) {
		protocol_errors++;
		conn_lost(c);
		return 1;
	}
	if (c->len < head + length)
		return 0;
	answer(c, status, c->buf + head, (size_t)length, head + (int)length, closing);
	return 1;
}

static void conn_io(struct ev_loop *l, ev_io *w, int revents)
{
	struct conn *c = (struct conn *)w;
	if (c->state == A_CONNECTING) {
		if (socket_error(w->fd)) {
			conn_lost(c);
			return;
		}
		pending--;
		connected++;
		c->state = A_READY;
		ev_io_stop(l, w);
		ev_io_set(w, w->fd, EV_READ);
		ev_io_start(l, w);
		check_ready();
		send_queued(c);
		return;
	}
	for (;;) {
		if (c->len == RESPONSE_MAX) {
			protocol_errors++;
			conn_lost(c);
			return;
		}
		ssize_t n = read(w->fd, c->buf + c->len, (size_t)(RESPONSE_MAX - c->len));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			conn_lost(c);
			return;
		}
		if (c->state != A_BUSY) {
			protocol_errors++; /* bytes nobody asked for */
			c->len = 0;
			continue;
		}
		c->len += (int)n;
		if (parse(c) && c->state == A_CLOSED)
			return;
	}
}

static void pump(struct ev_loop *l, ev_timer *w, int revents)
{
	int budget = max_pending > 0 ? max_pending - pending : n_conns;
	while (budget-- > 0 && next_to_connect < n_conns)
		connect_one(&conns[next_to_connect++]);
	check_ready();
	if (next_to_connect < n_conns) {
		ev_timer_set(&pump_timer, 0.002, 0.);
		ev_timer_start(loop, &pump_timer);
	}
}

static void drained(struct ev_loop *l, ev_timer *w, int revents)
{
	if (!reported) {
		lost += total_requests - answered - lost;
		report();
	}
}

/* Sends every command whose slot has come. */
static void pace(struct ev_loop *l, ev_timer *w, int revents)
{
	long long t = now_us();
	while (scheduled < total_requests) {
		long long due = t_go_us + scheduled * 1000000LL / rate;
		if (due > t)
			break;
		struct conn *c = &conns[scheduled % n_conns];
		scheduled++;
		if (c->state == A_READY)
			send_command(c, due);
		else if ((c->state == A_BUSY || c->state == A_CONNECTING) &&
			 c->queued < QUEUE_MAX) {
			c->queue[c->queued++] = due;
			queued_total++;
		} else
			lost++; /* its connection is gone, or hopelessly behind */
	}
	if (scheduled == total_requests) {
		ev_timer_stop(l, w);
		ev_timer_init(&drain_timer, drained, drain_s, 0.);
		ev_timer_start(l, &drain_timer);
		check_finished();
	}
}

static void on_go(struct ev_loop *l, ev_signal *w, int revents)
{
	if (going || !ready_reported)
		return;
	going = 1;
	t_go_us = now_us();
	cpu_go = cpu_seconds();
	total_requests = (long long)rate * run_seconds;
	ev_timer_init(&pace_timer, pace, 0., 0.001);
	ev_timer_start(loop, &pace_timer);
}

static void report(void)
{
	reported = 1;
	double window = (t_last_answer_us > t_go_us ? t_last_answer_us - t_go_us : 1) / 1e6;
	printf("{\"connections\":%d,\"offset\":%d,\"connected\":%d,\"connect_errors\":%d,"
	       "\"reconnects\":%lld,\"reopens\":%lld,\"rate_requested\":%d,\"seconds\":%d,\"requests\":%lld,"
	       "\"sent\":%lld,\"answered\":%lld,\"lost\":%lld,\"acks\":%lld,\"queued\":%lld,"
	       "\"protocol_errors\":%lld,\"rate_achieved\":%.1f,\"window_s\":%.3f,"
	       "\"latency_p50_us\":%lld,\"latency_p99_us\":%lld,\"latency_max_us\":%lld,"
	       "\"sched_p50_us\":%lld,\"sched_p99_us\":%lld,\"sched_max_us\":%lld,"
	       "\"cpu_window_s\":%.3f,\"error_samples\":[%s],\"status\":{",
	       n_conns, offset, connected, conn_errors, reconnects, reopens, rate, run_seconds, total_requests,
	       sent, answered, lost, acks_ok, queued_total, protocol_errors, answered / window, window,
	       hist_percentile(lat_hist, 0.50), hist_percentile(lat_hist, 0.99), lat_max_us,
	       hist_percentile(sched_hist, 0.50), hist_percentile(sched_hist, 0.99), sched_max_us,
	       cpu_seconds() - cpu_go, error_samples);
	int first = 1;
	for (int s = 0; s < 600; s++)
		if (status_counts[s]) {
			printf("%s\"%d\":%lld", first ? "" : ",", s, status_counts[s]);
			first = 0;
		}
	printf("},\"hist\":[");
	print_hist(lat_hist);
	printf("],\"sched_hist\":[");
	print_hist(sched_hist);
	printf("]}\n");
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: apiclient --port P [--host 127.0.0.1] [--connections N] [--offset K]\n"
		"  [--prefix NAME] [--rate PER_SECOND] [--seconds S] [--start-seconds 60]\n"
		"  [--token BEARER] [--src-first 2] [--src-last 9] [--max-pending 1000]\n"
		"  [--drain S]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (0) {
		}
		else if (!strcmp(a, "--host") && v) { host = v; i++; }
		else if (!strcmp(a, "--prefix") && v) { prefix = v; i++; }
		else if (!strcmp(a, "--token") && v) { token = v; i++; }
		OPT("--port", port)
		OPT("--connections", n_conns)
		OPT("--offset", offset)
		OPT("--rate", rate)
		OPT("--seconds", run_seconds)
		OPT("--start-seconds", start_seconds)
		OPT("--src-first", src_first)
		OPT("--src-last", src_last)
		OPT("--max-pending", max_pending)
		OPT("--drain", drain_s)
		else
			usage();
	}
	if (!port || n_conns < 1 || rate < 1 || run_seconds < 1 || !sources_valid() ||
	    (token && strlen(token) > 256))
		usage();
	if (!server_address(&server_addr, host, port))
		usage();
	conns = calloc((size_t)n_conns, sizeof(*conns));
	if (!conns) {
		fprintf(stderr, "apiclient: out of memory\n");
		return 1;
	}
	for (int k = 0; k < n_conns; k++)
		conns[k].index = offset + k;

	loop = client_loop(on_go);
	t_begin_us = now_us();
	ev_timer_init(&pump_timer, pump, 0., 0.);
	ev_timer_start(loop, &pump_timer);
	ev_run(loop, 0);
	_exit(0);
}
