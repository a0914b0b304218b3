/*
 * sseclient.c: many Server-Sent Events viewers of one countdown-server session
 * in one process, for bench/run's `sse` scenario: the counterpart of
 * loadclient.c, with the same options, phases, @ready line and JSON report, so
 * that bench/run drives both the same way and the two transports are compared
 * on the same figures. Plain non-blocking sockets on libev (epoll), no lws:
 * the client has to be cheaper than the server it measures.
 *
 * Each connection is bound in turn to 127.0.0.2 ... 127.0.0.9 (--src-first,
 * --src-last), sends
 *     GET /api/v1/sessions/<prefix>-0/events HTTP/1.1
 * and reads the answer: a 200 with Content-Type text/event-stream (a chunked
 * body is decoded), then events separated by a blank line: `event:` is
 * snapshot or patch, `id:` the seq, `data:` the same JSON as the WebSocket
 * frame, which viewer_ticks.h accounts exactly as loadclient does its frames
 * (lag, missed and out-of-order ticks). A comment line (`: keepalive`) is
 * counted and otherwise ignored. On top of that, per event:
 *   - bad_events: an event whose name is not its JSON "type", whose id is not
 *     its JSON "seq", or that has no data or no id;
 *   - seq_regressions: a patch whose id is not above the last one seen, or a
 *     snapshot whose id is below it;
 *   - seq_jumps: a patch whose id is more than one above the last (a merged
 *     patch; informational: the ticks it covers are judged by "missed").
 *
 * SSE is one-way, so the countdown is started as on the WebSocket: this
 * process also opens one WebSocket to /ws/<prefix>-0 (the starter; raw
 * RFC 6455, answering pings) before it reports ready, and on "go" sends
 * {"op":"start","seconds":S} on it. It is a viewer too (one more than the SSE
 * viewers), its frames are not counted. --no-start leaves it out.
 *
 * Phases as loadclient.c: connect (at most --max-pending in flight) until every
 * viewer has its snapshot, print `@ready {...}` on stderr; on SIGUSR1 start and
 * measure --ticks ticks; print one JSON line on stdout and keep every
 * connection open until SIGTERM/SIGINT.
 */
#define _GNU_SOURCE
#include "viewer_ticks.h"
#include "ev_client.h"

#define LINE_MAX_BYTES 2048
#define DATA_MAX_BYTES 2048

enum { C_IDLE, C_CONNECTING, C_HEADERS, C_STREAM, C_CLOSED };
enum { CH_SIZE, CH_EXT, CH_DATA, CH_CRLF, CH_END };

struct conn {
	ev_io io; /* first: the watcher's callback recovers the connection */
	struct viewer v;
	int index;
	int attempts;
	int state;
	int chunked, cstate;
	long long cleft;    /* bytes left in the current chunk */
	long long last_id;  /* last event's id, -1 none */
	long long id;       /* the id of the event being read, -1 none */
	int line_len, data_len, line_over;
	char event[12];
	char line[LINE_MAX_BYTES];
	char data[DATA_MAX_BYTES];
};

static struct ev_loop *loop;
static struct conn *conns;
static int total, port, max_pending = 1000, deadline_extra_s = 15;
static int no_start, hold, use_starter = 1;
static const char *host = "127.0.0.1", *prefix = "bench";
static struct sockaddr_in server_addr;
static char request[512];
static int request_len;

static int ready_reported, next_to_connect, pending, first_http_status, chunked_streams;
static long long bad_events, seq_jumps, seq_regressions, keepalives, http_errors;
static ev_timer pump_timer, watchdog_timer;
static char readbuf[65536];

/* ---------------------------------------------------------------- the starter WebSocket */

static struct {
	ev_io io;
	int fd, state; /* C_CONNECTING, C_HEADERS (waiting for 101), C_STREAM, C_CLOSED */
	int len;
	long long frames;
	char buf[16384];
} starter = { .fd = -1 };

static void check_ready(void);

/* Sends one masked WebSocket frame (opcode, payload of at most 125 bytes). */
static void starter_send(int opcode, const char *payload, size_t len)
{
	unsigned char frame[256];
	static const unsigned char mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
	if (starter.state != C_STREAM || len > 125)
		return;
	frame[0] = (unsigned char)(0x80 | opcode);
	frame[1] = (unsigned char)(0x80 | len);
	memcpy(frame + 2, mask, 4);
	for (size_t k = 0; k < len; k++)
		frame[6 + k] = (unsigned char)payload[k] ^ mask[k % 4];
	if (write(starter.fd, frame, 6 + len) != (ssize_t)(6 + len))
		fprintf(stderr, "sseclient: starter write failed: %s\n", strerror(errno));
}

static void starter_fail(const char *why)
{
	fprintf(stderr, "sseclient: starter WebSocket to /ws/%s-0: %s\n", prefix, why);
	exit(1);
}

/* Consumes whole frames from starter.buf: pings are answered, the rest dropped. */
static void starter_frames(void)
{
	unsigned char *b = (unsigned char *)starter.buf;
	int at = 0;
	for (;;) {
		if (starter.len - at < 2)
			break;
		int opcode = b[at] & 0x0f;
		long long len = b[at + 1] & 0x7f;
		int head = 2;
		if (len == 126) {
			if (starter.len - at < 4)
				break;
			len = (b[at + 2] << 8) | b[at + 3];
			head = 4;
		} else if (len == 127) {
			if (starter.len - at < 10)
				break;
			len = 0;
			for (int k = 0; k < 8; k++)
				len = (len << 8) | b[at + 2 + k];
			head = 10;
		}
		if (len > (long long)sizeof(starter.buf) - 16)
			starter_fail("frame too large");
		if (starter.len - at < head + len)
			break;
		if (opcode == 0x9)
			starter_send(0xA, (const char *)b + at + head, (size_t)len);
		else if (opcode == 0x8)
			starter.state = C_CLOSED;
		starter.frames++;
		at += head + (int)len;
	}
	memmove(starter.buf, starter.buf + at, (size_t)(starter.len - at));
	starter.len -= at;
}

static void starter_io(struct ev_loop *l, ev_io *w, int revents)
{
	if (starter.state == C_CONNECTING) {
		int err = socket_error(starter.fd);
		if (err)
			starter_fail(strerror(err));
		char req[512];
		int n = snprintf(req, sizeof(req),
				 "GET /ws/%s-0 HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
				 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
				 "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: countdown.v1\r\n\r\n",
				 prefix, host, port);
		if (write(starter.fd, req, (size_t)n) != n)
			starter_fail("could not send the upgrade");
		starter.state = C_HEADERS;
		ev_io_stop(l, w);
		ev_io_set(w, starter.fd, EV_READ);
		ev_io_start(l, w);
		return;
	}
	for (;;) {
		ssize_t n = read(starter.fd, starter.buf + starter.len, sizeof(starter.buf) - (size_t)starter.len);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			if (!reported && !no_start)
				starter_fail("closed by the server");
			ev_io_stop(l, w);
			starter.state = C_CLOSED;
			return;
		}
		starter.len += (int)n;
		if (starter.state == C_HEADERS) {
			char *end = memmem(starter.buf, (size_t)starter.len, "\r\n\r\n", 4);
			if (!end) {
				if (starter.len == (int)sizeof(starter.buf))
					starter_fail("headers too long");
				continue;
			}
			if (strncmp(starter.buf, "HTTP/1.1 101", 12))
				starter_fail("no 101 Switching Protocols");
			int head = (int)(end + 4 - starter.buf);
			memmove(starter.buf, starter.buf + head, (size_t)(starter.len - head));
			starter.len -= head;
			starter.state = C_STREAM;
			check_ready();
		}
		starter_frames();
	}
}

static void starter_connect(void)
{
	starter.fd = open_socket(&server_addr);
	if (starter.fd < 0)
		starter_fail(strerror(errno));
	starter.state = C_CONNECTING;
	ev_io_init(&starter.io, starter_io, starter.fd, EV_WRITE);
	ev_io_start(loop, &starter.io);
}

/* ---------------------------------------------------------------- SSE viewers */

static void conn_closed(struct conn *c)
{
	if (c->state == C_STREAM) {
		closed_after_open++;
		if (!c->v.got_snapshot)
			failed++;
	}
	if (c->state == C_CONNECTING || c->state == C_HEADERS)
		pending--;
	ev_io_stop(loop, &c->io);
	close(c->io.fd);
	c->state = C_CLOSED;
	viewer_gone(&c->v);
	check_ready();
}

/* Before the stream opened: try again later (up to 5 attempts, as loadclient). */
static void conn_error(struct conn *c)
{
	ev_io_stop(loop, &c->io);
	close(c->io.fd);
	pending--;
	conn_errors++;
	c->state = C_IDLE;
}

static void dispatch(struct conn *c)
{
	long long t = now_us();
	if (!c->data_len || c->id < 0 || !c->event[0]) {
		bad_events++;
		goto reset;
	}
	const char *data = c->data;
	size_t len = (size_t)c->data_len;
	const char *type = KEY(data, len, "\"type\":\"");
	size_t name = strlen(c->event);
	if (!type || (size_t)(data + len - type) <= name || memcmp(type, c->event, name) ||
	    type[name] != '"')
		bad_events++;
	const char *seq = KEY(data, len, "\"seq\":");
	if (!seq || strtoll(seq, NULL, 10) != c->id)
		bad_events++;
	int is_patch = !strcmp(c->event, "patch");
	if (c->last_id >= 0) {
		if (is_patch ? c->id <= c->last_id : c->id < c->last_id)
			seq_regressions++;
		else if (is_patch && c->id > c->last_id + 1)
			seq_jumps++;
	}
	c->last_id = c->id;
	if (viewer_received(&c->v, data, len, t) == VIEWER_FIRST_SNAPSHOT)
		check_ready();
reset:
	c->data_len = 0;
	c->event[0] = 0;
	c->id = -1;
}

/* One SSE line (without its end of line). */
static void sse_line(struct conn *c, char *line, int len)
{
	if (!len) {
		if (c->data_len || c->event[0] || c->id >= 0)
			dispatch(c);
		return;
	}
	if (line[0] == ':') {
		keepalives++;
		return;
	}
	char *colon = memchr(line, ':', (size_t)len);
	int name_len = colon ? (int)(colon - line) : len;
	char *value = colon ? colon + 1 : line + len;
	if (value < line + len && *value == ' ')
		value++;
	int value_len = (int)(line + len - value);
	if (name_len == 5 && !memcmp(line, "event", 5)) {
		if (value_len >= (int)sizeof(c->event))
			value_len = (int)sizeof(c->event) - 1;
		memcpy(c->event, value, (size_t)value_len);
		c->event[value_len] = 0;
	} else if (name_len == 2 && !memcmp(line, "id", 2)) {
		char *end;
		c->id = strtoll(value, &end, 10);
		if (end != line + len || value_len == 0 || c->id < 0) {
			bad_events++;
			c->id = -1;
		}
	} else if (name_len == 4 && !memcmp(line, "data", 4)) {
		int sep = c->data_len ? 1 : 0;
		if (c->data_len + sep + value_len > DATA_MAX_BYTES) {
			bad_events++;
			return;
		}
		if (sep)
			c->data[c->data_len++] = '\n';
		memcpy(c->data + c->data_len, value, (size_t)value_len);
		c->data_len += value_len;
	}
	/* retry: and unknown fields are ignored, as EventSource does */
}

/* The event stream's bytes (after any chunked framing). */
static void sse_bytes(struct conn *c, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;
		if (c->line_len + take > LINE_MAX_BYTES) {
			c->line_over = 1;
		} else {
			memcpy(c->line + c->line_len, p, take);
			c->line_len += (int)take;
		}
		if (!nl) {
			if (c->line_over)
				c->line_len = 0;
			return;
		}
		if (c->line_over) {
			bad_events++;
			c->line_over = 0;
		} else {
			int len = c->line_len;
			if (len && c->line[len - 1] == '\r')
				len--;
			sse_line(c, c->line, len);
		}
		c->line_len = 0;
		p = nl + 1;
		n -= take + 1;
	}
}

/* The response body's bytes: chunked framing off, if the server chunks. */
static void body_bytes(struct conn *c, const char *p, size_t n)
{
	if (!c->chunked) {
		sse_bytes(c, p, n);
		return;
	}
	while (n) {
		switch (c->cstate) {
		case CH_SIZE:
		case CH_EXT:
			if (*p == '\n') {
				c->cstate = c->cleft ? CH_DATA : CH_END;
			} else if (c->cstate == CH_SIZE && *p != '\r') {
				int d = *p >= '0' && *p <= '9' ? *p - '0'
				      : (*p | 0x20) >= 'a' && (*p | 0x20) <= 'f' ? (*p | 0x20) - 'a' + 10 : -1;
				if (d < 0)
					c->cstate = CH_EXT;
				else if (c->cleft < (1LL << 40))
					c->cleft = c->cleft * 16 + d;
			}
			p++;
			n--;
			break;
		case CH_DATA: {
			size_t take = n < (size_t)c->cleft ? n : (size_t)c->cleft;
			sse_bytes(c, p, take);
			c->cleft -= (long long)take;
			p += take;
			n -= take;
			if (!c->cleft)
				c->cstate = CH_CRLF;
			break;
		}
		case CH_CRLF:
			if (*p == '\n')
				c->cstate = CH_SIZE;
			p++;
			n--;
			break;
		case CH_END:
			return; /* the stream ended; the close follows */
		}
	}
}

/* The headers are in c->line[0..len); returns the offset of the body, or -1 to fail. */
static int response_head(struct conn *c, int len)
{
	int status = 0;
	if (len < 12 || strncmp(c->line, "HTTP/1.", 7))
		return -1;
	status = atoi(c->line + 9);
	if (!first_http_status)
		first_http_status = status;
	if (status != 200)
		return -1;
	const char *ct = header(c->line, (size_t)len, "content-type:");
	if (!ct || strncasecmp(ct, "text/event-stream", 17))
		return -1;
	const char *te = header(c->line, (size_t)len, "transfer-encoding:");
	c->chunked = te && !strncasecmp(te, "chunked", 7);
	chunked_streams += c->chunked;
	return 0;
}

static void conn_io(struct ev_loop *l, ev_io *w, int revents)
{
	struct conn *c = (struct conn *)w;
	if (c->state == C_CONNECTING) {
		if (socket_error(w->fd)) {
			conn_error(c);
			return;
		}
		if (write(w->fd, request, (size_t)request_len) != request_len) {
			conn_error(c);
			return;
		}
		c->state = C_HEADERS;
		ev_io_stop(l, w);
		ev_io_set(w, w->fd, EV_READ);
		ev_io_start(l, w);
		return;
	}
	for (;;) {
		ssize_t n = read(w->fd, readbuf, sizeof(readbuf));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			if (c->state == C_HEADERS) {
				conn_error(c);
				return;
			}
			conn_closed(c);
			return;
		}
		const char *p = readbuf;
		size_t left = (size_t)n;
		if (c->state == C_HEADERS) {
			size_t room = LINE_MAX_BYTES - (size_t)c->line_len;
			size_t take = left < room ? left : room;
			memcpy(c->line + c->line_len, p, take);
			int before = c->line_len;
			c->line_len += (int)take;
			char *end = memmem(c->line, (size_t)c->line_len, "\r\n\r\n", 4);
			if (!end) {
				if (c->line_len == LINE_MAX_BYTES) {
					http_errors++;
					pending--;
					c->state = C_CLOSED;
					failed++;
					ev_io_stop(l, w);
					close(w->fd);
					check_ready();
				}
				continue;
			}
			int head = (int)(end + 4 - c->line);
			if (response_head(c, head) < 0) {
				http_errors++;
				pending--;
				c->state = C_CLOSED; /* refused: no retry, it would be refused again */
				failed++;
				ev_io_stop(l, w);
				close(w->fd);
				check_ready();
				return;
			}
			pending--;
			connected++;
			c->state = C_STREAM;
			viewer_open(&c->v);
			p += head - before;
			left -= (size_t)(head - before);
			c->line_len = 0;
		}
		body_bytes(c, p, left);
	}
}

static void connect_one(struct conn *c)
{
	c->attempts++;
	int fd = open_socket(&server_addr);
	if (fd < 0) {
		conn_errors++;
		return;
	}
	c->state = C_CONNECTING;
	c->line_len = c->data_len = c->line_over = 0;
	c->chunked = 0;
	c->cstate = CH_SIZE;
	c->cleft = 0;
	c->id = c->last_id = -1;
	c->event[0] = 0;
	pending++;
	ev_io_init(&c->io, conn_io, fd, EV_WRITE);
	ev_io_start(loop, &c->io);
}

/* Issues connections (and retries) while fewer than max_pending are in flight. */
static void pump(struct ev_loop *l, ev_timer *w, int revents)
{
	int budget = max_pending > 0 ? max_pending - pending : n_conns;
	while (budget > 0 && next_to_connect < n_conns) {
		connect_one(&conns[next_to_connect++]);
		budget--;
	}
	for (int k = 0; k < n_conns && budget > 0 && next_to_connect >= n_conns; k++) {
		struct conn *c = &conns[k];
		if (c->state == C_IDLE && c->attempts > 0 && c->attempts < 5) {
			connect_one(c);
			budget--;
		} else if (c->state == C_IDLE && c->attempts >= 5) {
			c->state = C_CLOSED;
			failed++;
			check_ready();
		}
	}
	if (snapshots + failed < n_conns) {
		ev_timer_set(&pump_timer, 0.002, 0.);
		ev_timer_start(loop, &pump_timer);
	}
}

static void check_ready(void)
{
	if (ready_reported || snapshots + failed < n_conns)
		return;
	if (use_starter && starter.state != C_STREAM)
		return;
	ready_reported = 1;
	cpu_ready = cpu_seconds();
	fprintf(stderr, "@ready {\"connected\":%d,\"snapshots\":%d,\"failed\":%d,"
		"\"t_all_snapshots_ms\":%.3f}\n", connected, snapshots, failed,
		(t_all_snapshots_us - t_begin_us) / 1e3);
	fflush(stderr);
	if (no_start) {
		report();
		if (!hold)
			exit(0);
	}
}

static void watchdog(struct ev_loop *l, ev_timer *w, int revents)
{
	if (reported)
		return;
	if (now_us() > t_go_us + (long long)(n_ticks + deadline_extra_s) * 1000 * 1000)
		report();
	else {
		ev_timer_set(&watchdog_timer, 0.5, 0.);
		ev_timer_start(loop, &watchdog_timer);
	}
}

static void on_go(struct ev_loop *l, ev_signal *w, int revents)
{
	if (going || !ready_reported || no_start)
		return;
	going = 1;
	t_go_us = now_us();
	cpu_go = cpu_seconds();
	measuring = 0;
	for (int k = 0; k < n_conns; k++) {
		if (conns[k].state == C_STREAM)
			measuring++;
		else
			conns[k].v.done = 1; /* not measured; counted as missed in the report */
	}
	if (use_starter) {
		char op[64];
		int n = snprintf(op, sizeof(op), "{\"op\":\"start\",\"seconds\":%d}", seconds);
		starter_send(0x1, op, (size_t)n);
	}
	done_count = 0;
	ev_timer_init(&watchdog_timer, watchdog, 0.5, 0.);
	ev_timer_start(loop, &watchdog_timer);
	check_finished();
}

static void report(void)
{
	long long unreceived = 0;
	for (int k = 0; k < n_conns; k++)
		unreceived += viewer_unreceived(&conns[k].v);
	print_viewer_report(0, unreceived);
	printf("\"transport\":\"sse\",\"bad_events\":%lld,\"seq_jumps\":%lld,\"seq_regressions\":%lld,"
	       "\"keepalives\":%lld,\"http_errors\":%lld,\"first_http_status\":%d,"
	       "\"chunked_streams\":%d,\"starter_frames\":%lld,",
	       bad_events, seq_jumps, seq_regressions, keepalives, http_errors, first_http_status,
	       chunked_streams, starter.frames);
	print_lag_report();
}

static void usage(void)
{
	fprintf(stderr,
		"usage: sseclient --port P [--host 127.0.0.1] [--viewers N] [--offset K]\n"
		"  [--total T] [--prefix NAME] [--seconds S] [--ticks M] [--src-first 2]\n"
		"  [--src-last 9] [--max-pending 1000] [--no-start [--hold]] [--deadline-extra S]\n"
		"  (--event-loop and --spread-ms are accepted for loadclient's command line)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-start"))
			no_start = 1;
		else if (!strcmp(a, "--hold"))
			hold = 1;
		else if (!strcmp(a, "--host") && v) { host = v; i++; }
		else if (!strcmp(a, "--prefix") && v) { prefix = v; i++; }
		else if ((!strcmp(a, "--event-loop") || !strcmp(a, "--spread-ms")) && v) { i++; }
		OPT("--port", port)
		OPT("--viewers", n_conns)
		OPT("--offset", offset)
		OPT("--total", total)
		OPT("--seconds", seconds)
		OPT("--ticks", n_ticks)
		OPT("--src-first", src_first)
		OPT("--src-last", src_last)
		OPT("--max-pending", max_pending)
		OPT("--deadline-extra", deadline_extra_s)
		else
			usage();
	}
	if (!viewer_options_valid(port))
		usage();
	if (!total)
		total = offset + n_conns;
	/* The process holding viewer 0 starts the countdown, as loadclient's viewer 0 does. */
	use_starter = !no_start && offset == 0;
	if (!server_address(&server_addr, host, port))
		usage();
	request_len = snprintf(request, sizeof(request),
			       "GET /api/v1/sessions/%s-0/events HTTP/1.1\r\nHost: %s:%d\r\n"
			       "Accept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n",
			       prefix, host, port);
	conns = calloc((size_t)n_conns, sizeof(*conns));
	if (!conns) {
		fprintf(stderr, "sseclient: out of memory\n");
		return 1;
	}
	for (int k = 0; k < n_conns; k++)
		conns[k].index = offset + k;

	loop = client_loop(on_go);

	t_begin_us = now_us();
	if (use_starter)
		starter_connect();
	ev_timer_init(&pump_timer, pump, 0., 0.);
	ev_timer_start(loop, &pump_timer);
	ev_run(loop, 0);
	/* The kernel closes the sockets. */
	_exit(0);
}
