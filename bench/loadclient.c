/*
 * loadclient.c: many countdown.v1 viewers in one process, on libwebsockets'
 * client API, for bench/run. It runs on a libev loop (epoll) unless given
 * --event-loop poll: with 1,000 sessions ticking at 1,000 moments a second,
 * poll() over every descriptor made the client, sharing the server's two
 * cores, the noisiest part of a many-sessions run.
 *
 * Connection i (global index offset+i) joins session "<prefix>-<i / per_session>"
 * (one session "<prefix>-0" without --per-session). Sockets are bound in turn
 * to 127.0.0.2 ... 127.0.0.9 (--src-first/--src-last), so the ephemeral ports
 * of eight addresses are shared out (see the connect() wrapper below).
 *
 * Phases:
 *   1. connect (at most --max-pending handshakes in flight; 0 = all at once)
 *      and wait for every connection's snapshot. Prints to stderr
 *        @ready {"connected":..,"t_all_snapshots_ms":..}
 *      With --no-start it then prints its JSON report and exits, or with
 *      --hold as well keeps every connection open (answering the server's
 *      pings) until SIGTERM/SIGINT.
 *   2. on SIGUSR1 ("go"): the first connection of each session this process
 *      holds sends {"op":"start","seconds":S}, session k after
 *      k * spread_ms / sessions ms. Every connection then measures --ticks
 *      ticks: a patch with remaining = r (and no phase) is due at
 *      endsAt - r*1000 ms (endsAt from the start patch or the snapshot); its
 *      lag is receipt time - due time (CLOCK_REALTIME, same host).
 *   3. when every connection has its ticks (or the deadline passed) it prints
 *      one JSON line on stdout, then keeps its connections open (so the
 *      server's CPU window is not polluted by the closes) until SIGTERM/SIGINT.
 *
 * Lags go into a log-linear histogram (64 sub-buckets per power of two, ~1.6%
 * resolution); the report lists the non-empty buckets as [lower_us, count] so
 * bench/run can merge processes. Missed ticks: per connection, every r in
 * [S-ticks, S-1] not received. Out of order: a tick whose r is not below the
 * previous one.
 */
#define _GNU_SOURCE
#include <libwebsockets.h>
#include "libev_loop.h"
#include "viewer_ticks.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * A one-shot timer. On poll it is an lws sul; on libev it is libev's own,
 * since lws 4.1 on libev runs its suls only when its one libev timer fires,
 * and does not bring that timer forward for an earlier sul: session starts
 * spread over a second came late, and their ticks counted as missed.
 */
struct timer {
	lws_sorted_usec_list_t sul; /* first: callbacks get &sul */
	ev_timer ev;
	sul_cb_t cb;
};

struct conn {
	struct timer start; /* first: start timer for session starters */
	struct lws *wsi;
	struct viewer v;
	long long t_connect_us;
	int index;          /* global */
	int attempts;
	int state;          /* 0 idle, 1 connecting, 2 open, 3 closed/failed */
	int want_start;
};

static const lws_retry_bo_t no_validity = { .secs_since_valid_ping = 0 };

static struct lws_context *context;
static struct conn *conns;
static int per_session = 0, total = 0;
static int spread_ms = 0, max_pending = 1000, no_start = 0, hold = 0;
static int port = 0, deadline_extra_s = 15, use_libev = 1;
static struct ev_loop *loop; /* NULL on poll */
static ev_check after_iteration;
static const char *host = "127.0.0.1", *prefix = "bench";
static char (*paths)[96];
static char ifaces[256][16];

static volatile sig_atomic_t go_flag, stop_flag;
static int ready_reported;
static int next_to_connect, pending;
static struct timer pump_timer, watchdog_timer;

static void timer_fired(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)revents;
	struct timer *t = w->data;
	t->cb(&t->sul);
}

static void schedule(struct timer *t, sul_cb_t cb, long long us)
{
	if (!loop) {
		lws_sul_schedule(context, 0, &t->sul, cb, us);
		return;
	}
	ev_timer_stop(loop, &t->ev);
	t->cb = cb;
	ev_timer_init(&t->ev, timer_fired, (double)us / 1e6, 0.);
	t->ev.data = t;
	ev_timer_start(loop, &t->ev);
}

/*
 * Source addresses. lws_client_connect_info.iface would do, but lws 4.1 then
 * resolves it with getifaddrs() (a netlink dump) for every connection, which
 * made this client, not the server, the bottleneck of a join storm. So this
 * executable interposes connect(): libwebsockets' call to connect() binds here
 * first, to the next of 127.0.0.(src_first..src_last) in turn, with
 * IP_BIND_ADDRESS_NO_PORT so the kernel picks the port per 4-tuple at connect
 * time. --lws-iface goes back to lws's own iface binding.
 */
static int use_lws_iface;

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (!use_lws_iface && sa && sa->sa_family == AF_INET) {
		struct sockaddr_in local;
		socklen_t local_len = sizeof(local);
		if (!getsockname(fd, (struct sockaddr *)&local, &local_len) &&
		    local.sin_addr.s_addr == htonl(INADDR_ANY) && local.sin_port == 0)
			bind_next_source(fd);
	}
	return (int)syscall(SYS_connect, fd, sa, len);
}

static int session_of(int global) { return per_session > 0 ? global / per_session : 0; }


static void connect_one(struct conn *c)
{
	struct lws_client_connect_info i;
	memset(&i, 0, sizeof(i));
	i.context = context;
	i.address = host;
	i.port = port;
	i.path = paths[c - conns];
	i.host = host;
	i.origin = host;
	i.protocol = "countdown.v1";
	i.userdata = c;
	i.pwsi = &c->wsi;
	i.retry_and_idle_policy = &no_validity;
	if (use_lws_iface)
		i.iface = ifaces[c->index % (src_last - src_first + 1)];
	c->state = 1;
	c->attempts++;
	c->t_connect_us = now_us();
	pending++;
	if (!lws_client_connect_via_info(&i)) {
		/* CLIENT_CONNECTION_ERROR may or may not have run; it resets state. */
		if (c->state == 1) {
			pending--;
			c->state = 0;
			conn_errors++;
		}
	}
}

/* Issues connections (and retries) while fewer than max_pending are in flight. */
static void pump(lws_sorted_usec_list_t *sul)
{
	(void)sul;
	int budget = max_pending > 0 ? max_pending - pending : n_conns;
	while (budget > 0 && next_to_connect < n_conns) {
		connect_one(&conns[next_to_connect++]);
		budget--;
	}
	/* retries: connections that failed before opening, up to 5 attempts */
	for (int k = 0; k < n_conns && budget > 0 && next_to_connect >= n_conns; k++) {
		struct conn *c = &conns[k];
		if (c->state == 0 && c->attempts > 0 && c->attempts < 5) {
			connect_one(c);
			budget--;
		} else if (c->state == 0 && c->attempts >= 5) {
			c->state = 3;
			failed++;
		}
	}
	if (snapshots + failed < n_conns)
		schedule(&pump_timer, pump, 2000);
}

static void start_timer(lws_sorted_usec_list_t *sul)
{
	struct conn *c = (struct conn *)sul;
	if (c->state == 2 && c->wsi) {
		c->want_start = 1;
		lws_callback_on_writable(c->wsi);
	}
}

/* Ends the measurement when some connection never got all its ticks. */
static void watchdog(lws_sorted_usec_list_t *sul)
{
	(void)sul;
	if (reported)
		return;
	if (now_us() > t_go_us + (long long)(spread_ms + (n_ticks + deadline_extra_s) * 1000) * 1000)
		report();
	else
		schedule(&watchdog_timer, watchdog, 500 * 1000);
}

static void on_go(void)
{
	going = 1;
	t_go_us = now_us();
	cpu_go = cpu_seconds();
	measuring = 0;
	int sessions = per_session > 0 ? (total + per_session - 1) / per_session : 1;
	for (int k = 0; k < n_conns; k++) {
		struct conn *c = &conns[k];
		if (c->state != 2) {
			c->v.done = 1; /* not measured; counted as missed in the report */
			continue;
		}
		measuring++;
		int g = c->index;
		int first_of_session = per_session > 0 ? g % per_session == 0 : g == 0;
		if (!first_of_session)
			continue;
		long long delay_us = sessions > 1 ? (long long)session_of(g) * spread_ms * 1000 / sessions : 0;
		schedule(&c->start, start_timer, delay_us);
	}
	done_count = 0;
	schedule(&watchdog_timer, watchdog, 500 * 1000);
	check_finished();
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct conn *c = user;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		if (c && c->state == 1) {
			pending--;
			c->state = 0;
			c->wsi = NULL;
			conn_errors++;
			if (getenv("LOADCLIENT_DEBUG"))
				fprintf(stderr, "connect error %d: %s\n", c->index,
					in ? (const char *)in : "?");
		}
		break;
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		if (c) {
			pending--;
			c->state = 2;
			viewer_open(&c->v);
			connected++;
		}
		break;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		if (c && lws_is_first_fragment(wsi) && lws_is_final_fragment(wsi))
			viewer_received(&c->v, in, len, now_us());
		else if (c)
			other_frames++; /* fragmented: never expected from these servers */
		break;
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		if (c && c->want_start) {
			unsigned char buf[LWS_PRE + 64];
			int n = snprintf((char *)buf + LWS_PRE, 64, "{\"op\":\"start\",\"seconds\":%d}",
					 seconds);
			c->want_start = 0;
			if (lws_write(wsi, buf + LWS_PRE, (size_t)n, LWS_WRITE_TEXT) < n)
				return -1;
		}
		break;
	case LWS_CALLBACK_CLIENT_CLOSED:
		if (c) {
			if (c->state == 2)
				closed_after_open++;
			if (c->state == 2 && !c->v.got_snapshot)
				failed++;
			c->state = 3;
			c->wsi = NULL;
			viewer_gone(&c->v);
		}
		break;
	default:
		break;
	}
	return 0;
}

static const struct lws_protocols protocols[] = {
	{ "countdown.v1", callback, 0, 0, 0, NULL, 0 },
	{ NULL, NULL, 0, 0, 0, NULL, 0 }
};

static void report(void)
{
	long long unreceived = 0;
	for (int k = 0; k < n_conns; k++)
		unreceived += viewer_unreceived(&conns[k].v);
	print_viewer_report(per_session, unreceived);
	print_lag_report();
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		go_flag = 1;
	else
		stop_flag = 1;
	if (context)
		lws_cancel_service(context);
}

/* After each service: report readiness, start on "go". Returns 1 when the
 * client should stop servicing. */
static int after_service(void)
{
	if (!ready_reported && snapshots + failed >= n_conns) {
		ready_reported = 1;
		cpu_ready = cpu_seconds();
		fprintf(stderr, "@ready {\"connected\":%d,\"snapshots\":%d,\"failed\":%d,"
			"\"t_all_snapshots_ms\":%.3f}\n", connected, snapshots, failed,
			(t_all_snapshots_us - t_begin_us) / 1e3);
		fflush(stderr);
		if (no_start) {
			report();
			if (!hold)
				return 1;
		}
	}
	if (go_flag && !going && ready_reported)
		on_go();
	return stop_flag;
}

static void on_check(struct ev_loop *l, ev_check *w, int revents)
{
	(void)w;
	(void)revents;
	if (after_service())
		ev_break(l, EVBREAK_ALL);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: loadclient --port P [--host 127.0.0.1] [--viewers N] [--offset K]\n"
		"  [--total T] [--per-session V] [--prefix NAME] [--seconds S] [--ticks M]\n"
		"  [--spread-ms MS] [--src-first 2] [--src-last 9] [--max-pending 1000]\n"
		"  [--no-start [--hold]] [--deadline-extra S] [--lws-iface]\n"
		"  [--event-loop libev|poll]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct lws_context_creation_info info;
	n_conns = 1000;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-start"))
			no_start = 1;
		else if (!strcmp(a, "--hold"))
			hold = 1;
		else if (!strcmp(a, "--lws-iface"))
			use_lws_iface = 1;

		else if (!strcmp(a, "--host") && v) { host = v; i++; }
		else if (!strcmp(a, "--prefix") && v) { prefix = v; i++; }
		else if (!strcmp(a, "--event-loop") && v && (!strcmp(v, "libev") || !strcmp(v, "poll"))) {
			use_libev = !strcmp(v, "libev");
			i++;
		}
		OPT("--port", port)
		OPT("--viewers", n_conns)
		OPT("--offset", offset)
		OPT("--total", total)
		OPT("--per-session", per_session)
		OPT("--seconds", seconds)
		OPT("--ticks", n_ticks)
		OPT("--spread-ms", spread_ms)
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
	for (int k = 0; k <= src_last - src_first; k++)
		snprintf(ifaces[k], sizeof(ifaces[k]), "127.0.0.%d", src_first + k);

	conns = calloc((size_t)n_conns, sizeof(*conns));
	paths = calloc((size_t)n_conns, sizeof(*paths));
	for (int k = 0; k < n_conns; k++) {
		conns[k].index = offset + k;
		snprintf(paths[k], sizeof(paths[k]), "/ws/%s-%d", prefix, session_of(offset + k));
	}

	lws_set_log_level(getenv("LOADCLIENT_DEBUG") ? LLL_ERR | LLL_WARN | LLL_NOTICE : LLL_ERR, NULL);
	memset(&info, 0, sizeof(info));
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = protocols;
	info.timeout_secs = 30;
	/* No client-side validity timers: lws keeps them in one sorted list, and
	 * inserting 10k of them costs O(n^2). The servers ping; lws answers. */
	info.retry_and_idle_policy = &no_validity;
	void *foreign[2];
	if (use_libev && !(loop = lend_libev_loop(&info, foreign, "loadclient")))
		return 1;
	context = lws_create_context(&info);
	if (!context) {
		fprintf(stderr, "loadclient: no context\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR1, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	t_begin_us = now_us();
	pump(NULL);
	if (loop) {
		/* lws_service runs the libev loop until after_service breaks it. */
		ev_check_init(&after_iteration, on_check);
		ev_check_start(loop, &after_iteration);
		lws_service(context, 0);
	} else {
		while (!after_service())
			if (lws_service(context, 0) < 0)
				break;
	}
	/* The kernel closes the sockets; tearing down 19k wsis buys nothing here. */
	_exit(0);
}
