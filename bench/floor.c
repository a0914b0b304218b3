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
 * lws_write() each in LWS_CALLBACK_SERVER_WRITEABLE. Same poll backend, same
 * context options (UTF-8 validation, security headers, no IPv6), same idle
 * policy (ping after 20 s of silence, hang up after 30 s) as countdown-server.
 * No viewer-count patches, no acks, no merging: a viewer that falls more than
 * one seq behind just gets the latest frame.
 *
 *   floor [--host 127.0.0.1] [--port 0] [--rx-buffer BYTES] [--ping-after S] [--hangup-after S]
 *
 * --rx-buffer sets the protocol's rx_buffer_size (default 0, as countdown-server:
 * lws then gives each connection a 4 KiB receive buffer). --ping-after and
 * --hangup-after set the lws idle policy (default 20 and 30 s, as countdown-server;
 * 0 and 0 turn lws's validity timers off). --fd-limit sets
 * fd_limit_per_thread (default 0: lws sizes its tables from ulimit -n; below
 * the ulimit, lws switches to a linear fd lookup: see PROFILE.md).
 *
 * prints "floor listening on http://HOST:PORT/" once listening; SIGINT/SIGTERM stop it.
 */
#define _GNU_SOURCE
#include <libwebsockets.h>
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
	struct pss *prev, *next;
	unsigned long long sent_seq;
	int needs_snapshot;
};

#define BUCKETS 4096
static struct session *table[BUCKETS];
static volatile sig_atomic_t stop_flag;
static struct lws_context *context;
static char epoch[17];

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
		lws_callback_on_writable(wsi);
		break;
	}

	case LWS_CALLBACK_RECEIVE: {
		if (!p->session)
			return -1;
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
		if (p->sent_seq >= s->seq)
			break;
		p->sent_seq = s->seq;
		if (lws_write(wsi, s->frame + LWS_PRE, s->frame_len, LWS_WRITE_TEXT) < 0)
			return -1;
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

static lws_retry_bo_t idle_policy = {
	.secs_since_valid_ping = 20,
	.secs_since_valid_hangup = 30,
};

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
	int port = 0, fd_limit = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ping-after") && i + 1 < argc)
			idle_policy.secs_since_valid_ping = (uint16_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--hangup-after") && i + 1 < argc)
			idle_policy.secs_since_valid_hangup = (uint16_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--fd-limit") && i + 1 < argc)
			fd_limit = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rx-buffer") && i + 1 < argc)
			protocols[1].rx_buffer_size = (size_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--host") && i + 1 < argc)
			host = argv[++i];
		else {
			fprintf(stderr, "usage: floor [--host ADDRESS] [--port PORT] [--rx-buffer BYTES]\n"
				"             [--ping-after S] [--hangup-after S] [--fd-limit N]\n");
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
		       LWS_SERVER_OPTION_DISABLE_IPV6;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	context = lws_create_context(&info);
	if (!context) {
		fprintf(stderr, "floor: could not listen on %s:%d\n", host, port);
		return 1;
	}
	struct lws_vhost *vh = lws_get_vhost_by_name(context, "default");
	printf("floor listening on http://%s:%d/\n", host, vh ? lws_get_vhost_listen_port(vh) : port);
	fflush(stdout);

	while (!stop_flag)
		if (lws_service(context, 0) < 0)
			break;
	lws_context_destroy(context);
	return 0;
}
