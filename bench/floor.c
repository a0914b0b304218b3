/*
 * floor.c: the C floor for countdown-server's fan-out benchmark.
 *
 * A minimal libwebsockets server on the same Debian libwebsockets 4.1.6,
 * speaking just enough of countdown.v1 for bench/loadclient to drive it the
 * same way it drives countdown-server:
 *
 *   - ws://HOST:PORT/ws/<session>, subprotocol countdown.v1 (also the default);
 *   - the first frame is a snapshot of the same shape as countdown-server's;
 *   - {"op":"start","seconds":N} starts a countdown: endsAt = now + N s, and
 *     one patch {"type":"patch","seq":S,"patch":{"phase":"running",...,"endsAt":E}};
 *   - the patch for remaining = r goes out at endsAt - r s:
 *     {"type":"patch","seq":S,"patch":{"label":"r","remaining":r}}
 *     -- the same bytes countdown-server sends for a tick.
 *
 * What it does per tick is the floor any server on this library pays: one
 * lws_sul timer per session, the frame built once into a shared buffer, then
 * lws_callback_on_writable() on each of the session's connections and one
 * lws_write() each in LWS_CALLBACK_SERVER_WRITEABLE. Same event loop (libev on
 * a foreign loop, or lws's poll), same context options (UTF-8 validation,
 * security headers, no IPv6, explicit vhost) and the same keepalive as
 * countdown-server: lws's own idle policy off, and one sweep a second over
 * every connection that pings after --ping-after s of silence (the ping carries
 * "ka", as the server's) and hangs up --hangup-after s after a ping went
 * unanswered. No viewer-count patches, no acks, no merging: a viewer that falls
 * more than one seq behind just gets the latest frame.
 *
 *   floor [--host 127.0.0.1] [--port 0] [--event-loop libev|poll] [--rx-buffer BYTES]
 *         [--ping-after S] [--hangup-after S] [--fd-limit N]
 *
 * --event-loop: libev (default, as countdown-server on Linux) or poll.
 * --rx-buffer sets the protocol's rx_buffer_size (default 0: lws then gives each
 * connection a 4 KiB receive buffer; bench/run passes the server's 512).
 * --ping-after and --hangup-after: the sweep (default 20 and 30 s, as
 * countdown-server; --ping-after 0 turns the sweep off). --fd-limit sets
 * fd_limit_per_thread (default 0: lws sizes its tables from ulimit -n; below
 * the ulimit, lws switches to a linear fd lookup: see PROFILE.md).
 *
 * prints "floor listening on http://HOST:PORT/" once listening; SIGINT/SIGTERM stop it.
 */
#define _GNU_SOURCE
#include <libwebsockets.h>
#include "libev_loop.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SESSION 64
#define FRAME_MAX 512

struct pss;

struct session {
	lws_sorted_usec_list_t sul; /* first: the timer callback recovers the session */
	struct lws_context *context;
	struct session *hash_next;
	struct pss *viewers;
	int viewer_count;
	int running;
	int remaining;
	int duration;
	long long ends_at; /* epoch ms */
	unsigned long long seq;
	size_t frame_len;
	unsigned char frame[LWS_PRE + FRAME_MAX]; /* latest patch, encoded once */
	char id[MAX_SESSION + 1];
};

struct pss {
	struct lws *wsi;
	struct session *session;
	struct pss *prev, *next;         /* the session's viewers */
	struct pss *all_prev, *all_next; /* every connection, for the sweep */
	unsigned long long sent_seq;
	long long last_heard, pinged_at; /* ms; pinged_at 0: not in this silence */
	int needs_snapshot;
	int ping_due;
};

#define BUCKETS 4096
static struct session *table[BUCKETS];
static volatile sig_atomic_t stop_flag;
static struct lws_context *context;
static struct ev_loop *loop; /* NULL on poll */
static char epoch[17];
static struct pss *all_conns;
static int ping_after_s = 20, hangup_after_s = 30;
static lws_sorted_usec_list_t sweep_sul;

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h & (BUCKETS - 1);
}

/* The session named by /ws/<id>, or 0 if the URI is not that. */
static int session_id(struct lws *wsi, char *out)
{
	char uri[128];
	int n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);
	if (n <= 4 || strncmp(uri, "/ws/", 4) || n - 4 > MAX_SESSION)
		return 0;
	for (int i = 4; i < n; i++) {
		char c = uri[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	memcpy(out, uri + 4, (size_t)(n - 4));
	out[n - 4] = '\0';
	return 1;
}

static struct session *find_or_create(const char *id)
{
	unsigned h = hash(id);
	for (struct session *s = table[h]; s; s = s->hash_next)
		if (!strcmp(s->id, id))
			return s;
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	strcpy(s->id, id);
	s->context = context;
	s->hash_next = table[h];
	table[h] = s;
	return s;
}

static void broadcast(struct session *s)
{
	for (struct pss *p = s->viewers; p; p = p->next)
		lws_callback_on_writable(p->wsi);
}

static void tick(lws_sorted_usec_list_t *sul);

/* Arms the session's timer for the next tick: remaining = r is due at endsAt - r s. */
static void schedule(struct session *s)
{
	long long due_ms = s->ends_at - (long long)(s->remaining - 1) * 1000;
	long long delay = due_ms * 1000 - now_us();
	lws_sul_schedule(s->context, 0, &s->sul, tick, delay > 0 ? delay : 0);
}

static void tick(lws_sorted_usec_list_t *sul)
{
	struct session *s = (struct session *)sul;
	char *out = (char *)s->frame + LWS_PRE;
	long long left = s->ends_at - now_ms();
	s->seq++;
	if (left <= 0) {
		s->running = 0;
		s->remaining = 0;
		s->frame_len = (size_t)snprintf(out, FRAME_MAX,
			"{\"type\":\"patch\",\"seq\":%llu,\"patch\":{\"phase\":\"finished\","
			"\"spinner\":false,\"enabled\":true,\"label\":\"Countdown finished\","
			"\"remaining\":0,\"endsAt\":null}}", s->seq);
	} else {
		s->remaining = (int)((left + 999) / 1000);
		s->frame_len = (size_t)snprintf(out, FRAME_MAX,
			"{\"type\":\"patch\",\"seq\":%llu,\"patch\":{\"label\":\"%d\",\"remaining\":%d}}",
			s->seq, s->remaining, s->remaining);
		schedule(s);
	}
	broadcast(s);
}

static void start(struct session *s, int seconds)
{
	if (s->running || seconds < 1 || seconds > 86400)
		return;
	s->running = 1;
	s->duration = seconds;
	s->remaining = seconds;
	s->ends_at = now_ms() + (long long)seconds * 1000;
	s->seq++;
	s->frame_len = (size_t)snprintf((char *)s->frame + LWS_PRE, FRAME_MAX,
		"{\"type\":\"patch\",\"seq\":%llu,\"patch\":{\"phase\":\"running\",\"spinner\":true,"
		"\"enabled\":false,\"label\":\"%d\",\"remaining\":%d,\"duration\":%d,\"endsAt\":%lld,"
		"\"viewers\":%d}}", s->seq, seconds, seconds, seconds, s->ends_at, s->viewer_count);
	schedule(s);
	broadcast(s);
}

static int write_snapshot(struct lws *wsi, struct pss *p)
{
	unsigned char buf[LWS_PRE + FRAME_MAX];
	struct session *s = p->session;
	char ends[24];
	if (s->running)
		snprintf(ends, sizeof(ends), "%lld", s->ends_at);
	else
		strcpy(ends, "null");
	int n = snprintf((char *)buf + LWS_PRE, FRAME_MAX,
		"{\"type\":\"snapshot\",\"session\":\"%s\",\"epoch\":\"%s\",\"seq\":%llu,"
		"\"serverTime\":%lld,\"state\":{\"phase\":\"%s\",\"spinner\":%s,\"enabled\":%s,"
		"\"label\":\"%s%.0d\",\"remaining\":%d,\"duration\":%d,\"endsAt\":%s,\"viewers\":%d}}",
		s->id, epoch, s->seq, now_ms(), s->running ? "running" : "idle",
		s->running ? "true" : "false", s->running ? "false" : "true",
		s->running ? "" : "Ready", s->running ? s->remaining : 0, s->remaining,
		s->duration, ends, s->viewer_count);
	p->sent_seq = s->seq;
	p->needs_snapshot = 0;
	return lws_write(wsi, buf + LWS_PRE, (size_t)n, LWS_WRITE_TEXT) < 0 ? -1 : 0;
}

/* The keepalive sweep, as countdown-server's: once a second, one pass. */
static void sweep(lws_sorted_usec_list_t *sul)
{
	long long now = now_ms();
	for (struct pss *p = all_conns; p; p = p->all_next) {
		long long silent = now - p->last_heard;
		if (silent >= hangup_after_s * 1000LL && p->pinged_at)
			lws_set_timeout(p->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
		else if (silent >= ping_after_s * 1000LL && !p->pinged_at) {
			p->pinged_at = now;
			p->ping_due = 1;
			lws_callback_on_writable(p->wsi);
		}
	}
	lws_sul_schedule(context, 0, sul, sweep, LWS_US_PER_SEC);
}

static void heard(struct pss *p)
{
	p->last_heard = now_ms();
	p->pinged_at = 0;
}

/* Finds "key":<int> in a small JSON text; returns def when absent. */
static long long json_int(const char *text, size_t len, const char *key, long long def)
{
	char pattern[32];
	int k = snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	for (size_t i = 0; i + (size_t)k <= len; i++) {
		if (!memcmp(text + i, pattern, (size_t)k)) {
			const char *v = text + i + k;
			while (v < text + len && *v == ' ')
				v++;
			if (v >= text + len || (*v != '-' && (*v < '0' || *v > '9')))
				return def;
			return strtoll(v, NULL, 10);
		}
	}
	return def;
}

static int callback_countdown(struct lws *wsi, enum lws_callback_reasons reason,
			      void *user, void *in, size_t len)
{
	struct pss *p = user;
	char id[MAX_SESSION + 1];

	switch (reason) {
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
		return session_id(wsi, id) ? 0 : -1;

	case LWS_CALLBACK_ESTABLISHED: {
		if (!session_id(wsi, id))
			return -1;
		struct session *s = find_or_create(id);
		if (!s)
			return -1;
		p->wsi = wsi;
		p->session = s;
		p->needs_snapshot = 1;
		p->prev = NULL;
		p->next = s->viewers;
		if (s->viewers)
			s->viewers->prev = p;
		s->viewers = p;
		s->viewer_count++;
		p->all_prev = NULL;
		p->all_next = all_conns;
		if (all_conns)
			all_conns->all_prev = p;
		all_conns = p;
		heard(p);
		lws_callback_on_writable(wsi);
		break;
	}

	case LWS_CALLBACK_RECEIVE_PONG:
		if (p->session)
			heard(p);
		break;

	case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
		/* lws_service no longer returns by itself on libev */
		if (stop_flag && loop)
			ev_break(loop, EVBREAK_ALL);
		break;

	case LWS_CALLBACK_RECEIVE: {
		if (!p->session)
			return -1;
		heard(p);
		const char *text = in;
		/* Only "start" matters to the benchmark; everything else is ignored. */
		if (len < 4096 && memmem(text, len, "\"start\"", 7))
			start(p->session, (int)json_int(text, len, "seconds", 5));
		break;
	}

	case LWS_CALLBACK_SERVER_WRITEABLE: {
		if (!p->session)
			break;
		struct session *s = p->session;
		if (p->needs_snapshot) {
			if (write_snapshot(wsi, p))
				return -1;
			if (p->sent_seq < s->seq)
				lws_callback_on_writable(wsi);
			break;
		}
		if (p->sent_seq < s->seq) {
			/* What the session has first; an owed ping waits, as in the server. */
			p->sent_seq = s->seq;
			if (lws_write(wsi, s->frame + LWS_PRE, s->frame_len, LWS_WRITE_TEXT) < 0)
				return -1;
			if (p->ping_due)
				lws_callback_on_writable(wsi);
		} else if (p->ping_due) {
			unsigned char ping[LWS_PRE + 2];
			p->ping_due = 0;
			memcpy(ping + LWS_PRE, "ka", 2);
			if (lws_write(wsi, ping + LWS_PRE, 2, LWS_WRITE_PING) < 0)
				return -1;
		}
		break;
	}

	case LWS_CALLBACK_CLOSED:
		if (p->session) {
			struct session *s = p->session;
			if (p->prev)
				p->prev->next = p->next;
			else
				s->viewers = p->next;
			if (p->next)
				p->next->prev = p->prev;
			s->viewer_count--;
			p->session = NULL;
			if (p->all_prev)
				p->all_prev->all_next = p->all_next;
			else
				all_conns = p->all_next;
			if (p->all_next)
				p->all_next->all_prev = p->all_prev;
		}
		break;

	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
	return 0;
}

static struct lws_protocols protocols[] = {
	{ "http", lws_callback_http_dummy, 0, 0, 0, NULL, 0 },
	{ "countdown.v1", callback_countdown, sizeof(struct pss), 0, 0, NULL, 0 },
	{ NULL, NULL, 0, 0, 0, NULL, 0 }
};

static const struct lws_protocol_vhost_options pvo_default = { NULL, NULL, "default", "1" };
static const struct lws_protocol_vhost_options pvo = { NULL, &pvo_default, "countdown.v1", "" };

/* lws's own keepalive off: its per-connection timers cost O(n^2) per ping round. */
static const lws_retry_bo_t idle_policy = { .secs_since_valid_ping = 0 };

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
	if (context)
		lws_cancel_service(context);
}

int main(int argc, char **argv)
{
	struct lws_context_creation_info info;
	const char *host = "127.0.0.1";
	int port = 0, fd_limit = 0, use_libev = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ping-after") && i + 1 < argc)
			ping_after_s = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--hangup-after") && i + 1 < argc)
			hangup_after_s = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--event-loop") && i + 1 < argc) {
			const char *name = argv[++i];
			if (strcmp(name, "libev") && strcmp(name, "poll")) {
				fprintf(stderr, "floor: --event-loop is libev or poll\n");
				return 2;
			}
			use_libev = !strcmp(name, "libev");
		}
		else if (!strcmp(argv[i], "--fd-limit") && i + 1 < argc)
			fd_limit = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rx-buffer") && i + 1 < argc)
			protocols[1].rx_buffer_size = (size_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--host") && i + 1 < argc)
			host = argv[++i];
		else {
			fprintf(stderr, "usage: floor [--host ADDRESS] [--port PORT] [--event-loop libev|poll]\n"
				"             [--rx-buffer BYTES] [--ping-after S] [--hangup-after S]\n"
				"             [--fd-limit N]\n");
			return 2;
		}
	}
	snprintf(epoch, sizeof(epoch), "%016llx", (unsigned long long)now_us());

	lws_set_log_level(getenv("FLOOR_DEBUG") ? 0xff : LLL_ERR | LLL_WARN, NULL);
	memset(&info, 0, sizeof(info));
	info.port = port;
	info.iface = host;
	info.protocols = protocols;
	info.pvo = &pvo;
	info.retry_and_idle_policy = &idle_policy;
	info.fd_limit_per_thread = (unsigned int)fd_limit;
	info.options = LWS_SERVER_OPTION_VALIDATE_UTF8 |
		       LWS_SERVER_OPTION_HTTP_HEADERS_SECURITY_BEST_PRACTICES_ENFORCE |
		       LWS_SERVER_OPTION_DISABLE_IPV6 | LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
	/* A loop of our own, as countdown-server's, so SIGINT and SIGTERM stay ours. */
	void *foreign[2];
	if (use_libev && !(loop = lend_libev_loop(&info, foreign, "floor")))
		return 1;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	context = lws_create_context(&info);
	if (!context) {
		fprintf(stderr, "floor: could not create the context (%s)\n",
			use_libev ? "libev plugin missing?" : "poll");
		return 1;
	}
	struct lws_vhost *vh = lws_create_vhost(context, &info);
	if (!vh) {
		fprintf(stderr, "floor: could not listen on %s:%d\n", host, port);
		lws_context_destroy(context);
		return 1;
	}
	printf("floor listening on http://%s:%d/\n", host, lws_get_vhost_listen_port(vh));
	fflush(stdout);
	if (ping_after_s > 0)
		lws_sul_schedule(context, 0, &sweep_sul, sweep, LWS_US_PER_SEC);

	while (!stop_flag)
		if (lws_service(context, 0) < 0)
			break;
	lws_context_destroy(context);
	if (loop)
		ev_loop_destroy(loop);
	return 0;
}
