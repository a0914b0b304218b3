/*
 * viewer_ticks.h: what bench's load clients measure on a viewer, whatever the
 * transport (loadclient.c on WebSocket, sseclient.c on Server-Sent Events), so
 * that a missed tick means the same on both: the clocks, the lag histogram,
 * the per-tick rows and the accounting of one countdown.v1 JSON message.
 * Header-only, state in statics: each client is one translation unit.
 *
 * A patch with remaining = r (and no phase) is due at endsAt - r*1000 ms
 * (endsAt from the start patch or the snapshot); its lag is receipt time - due
 * time (CLOCK_REALTIME, same host). Missed: per viewer, every r in
 * [seconds-ticks, seconds-1] not received. A merged patch (a slow reader's)
 * carries the latest remaining only, so the ticks it jumps over count as
 * missed. Out of order: a tick whose r is not below the previous one.
 */
#ifndef BENCH_VIEWER_TICKS_H
#define BENCH_VIEWER_TICKS_H

#define _GNU_SOURCE
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

/* Not every client uses every helper. */
#define VT_FN static __attribute__((unused))

/* One viewer's view of the countdown. */
struct viewer {
	long long ends_at; /* ms, 0 unknown */
	int got_snapshot;
	int last_r; /* last tick's r, or big */
	int ticks;  /* ticks received within the measured range */
	int done;
	int expect; /* next r expected */
};

#define HBUCKETS 4096
static unsigned long long hist[HBUCKETS];
/* per measured tick (index seconds-1-r): count, min and max lag */
#define MAX_TICKS 4096
static long long tick_count[MAX_TICKS], tick_min[MAX_TICKS], tick_max[MAX_TICKS], tick_sum[MAX_TICKS];

static int seconds = 3600, n_ticks = 10;
static int going; /* after "go": frames count in the window, ticks are measured */
static long long lag_max_us = -1, lag_min_us = 1LL << 62, lag_count;
static long long frames_window, frames_total, ticks_in_range, missed, out_of_order, viewers_patches;
static long long bytes_window, acks, errors_rx, other_frames;

VT_FN long long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

VT_FN double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

VT_FN long rss_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(field);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n))
			v = atol(line + n + 1);
	fclose(f);
	return v;
}

/* Log-linear: 64 sub-buckets per power of two, ~1.6% resolution. */
VT_FN int bucket_of(long long v)
{
	if (v < 64)
		return (int)(v < 0 ? 0 : v);
	int e = 63 - __builtin_clzll((unsigned long long)v);
	int m = (int)((v >> (e - 6)) & 63);
	int b = 64 + (e - 6) * 64 + m;
	return b < HBUCKETS ? b : HBUCKETS - 1;
}

VT_FN long long bucket_lower(int b)
{
	if (b < 64)
		return b;
	int e = (b - 64) / 64 + 6, m = (b - 64) % 64;
	return (long long)(64 + m) << (e - 6);
}

VT_FN void record_in(unsigned long long *h, long long v)
{
	h[bucket_of(v)]++;
}

VT_FN void record_lag(long long lag)
{
	if (lag > lag_max_us)
		lag_max_us = lag;
	if (lag < lag_min_us)
		lag_min_us = lag;
	lag_count++;
	record_in(hist, lag);
}

/* The non-empty buckets as [lower_us, count],... so bench/run can merge processes. */
VT_FN void print_hist(const unsigned long long *h)
{
	int first = 1;
	for (int b = 0; b < HBUCKETS; b++)
		if (h[b]) {
			printf("%s[%lld,%llu]", first ? "" : ",", bucket_lower(b), h[b]);
			first = 0;
		}
}

/* The lower bound (us) of the bucket holding the fraction-th sample, or -1. */
VT_FN long long hist_percentile(const unsigned long long *h, double fraction)
{
	unsigned long long total = 0, seen = 0;
	for (int b = 0; b < HBUCKETS; b++)
		total += h[b];
	if (!total)
		return -1;
	double rank = fraction * (double)(total - 1);
	for (int b = 0; b < HBUCKETS; b++) {
		seen += h[b];
		if ((double)seen > rank)
			return bucket_lower(b);
	}
	return -1;
}

/* Finds "key": in text; returns pointer to the value or NULL. */
VT_FN const char *find_key(const char *text, size_t len, const char *key, size_t klen)
{
	const char *end = text + len;
	for (const char *p = text; p + klen <= end; p++) {
		p = memchr(p, key[0], (size_t)(end - p));
		if (!p || p + klen > end)
			return NULL;
		if (!memcmp(p, key, klen))
			return p + klen;
	}
	return NULL;
}

#define KEY(t, l, k) find_key(t, l, k, sizeof(k) - 1)

/*
 * Source addresses: a socket not yet bound is bound to the next of
 * 127.0.0.(src_first..src_last) in turn, with IP_BIND_ADDRESS_NO_PORT so the
 * kernel picks the port per 4-tuple at connect time, and the ephemeral ports
 * of eight addresses are shared out.
 */
static int src_next, src_first = 2, src_last = 9;

VT_FN void bind_next_source(int fd)
{
	struct sockaddr_in local;
	int one = 1;
	int span = src_last - src_first + 1;
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	memset(&local, 0, sizeof(local));
	local.sin_family = AF_INET;
	local.sin_addr.s_addr = htonl(0x7f000000u | (unsigned)(src_first + src_next++ % span));
	bind(fd, (struct sockaddr *)&local, sizeof(local));
}

/* A viewer newly open: no tick seen yet. */
VT_FN void viewer_open(struct viewer *v)
{
	v->last_r = 1 << 30;
	v->expect = 1 << 30;
}

/* Marks the viewer measured; returns 1 the first time. */
VT_FN int viewer_finish(struct viewer *v)
{
	if (v->done)
		return 0;
	v->done = 1;
	return 1;
}

enum viewer_event {
	VIEWER_OTHER,
	VIEWER_FIRST_SNAPSHOT, /* the viewer's first snapshot */
	VIEWER_DONE,           /* the viewer has every measured tick (or passed them) */
};

/* Accounts one JSON message (a WebSocket frame or an SSE event's data) received at t. */
VT_FN enum viewer_event viewer_message(struct viewer *c, const char *text, size_t len, long long t)
{
	frames_total++;
	if (going) {
		frames_window++;
		bytes_window += (long long)len;
	}
	const char *type = KEY(text, len, "\"type\":\"");
	if (!type)
		return VIEWER_OTHER;
	size_t rest = len - (size_t)(type - text);
	if (rest >= 8 && !memcmp(type, "snapshot", 8)) {
		const char *e = KEY(text, len, "\"endsAt\":");
		c->ends_at = e && *e != 'n' ? strtoll(e, NULL, 10) : 0;
		if (c->got_snapshot)
			return VIEWER_OTHER;
		c->got_snapshot = 1;
		return VIEWER_FIRST_SNAPSHOT;
	}
	if (rest >= 5 && !memcmp(type, "patch", 5)) {
		const char *ph = KEY(text, len, "\"phase\":\"");
		const char *rem = KEY(text, len, "\"remaining\":");
		const char *ea = KEY(text, len, "\"endsAt\":");
		if (ea)
			c->ends_at = *ea == 'n' ? 0 : strtoll(ea, NULL, 10);
		if (ph) {
			if (!memcmp(ph, "running", 7) && rem) {
				int r = atoi(rem);
				c->last_r = r;
				c->expect = r - 1;
			}
			return VIEWER_OTHER;
		}
		if (!rem) {
			viewers_patches++;
			return VIEWER_OTHER;
		}
		int r = atoi(rem);
		if (r <= 0 || !c->ends_at || !going)
			return VIEWER_OTHER;
		if (r >= c->last_r) {
			out_of_order++;
			return VIEWER_OTHER;
		}
		c->last_r = r;
		int lowest = seconds - n_ticks; /* measured: r in [lowest, seconds-1] */
		if (r < lowest) { /* jumped past the measured range */
			if (c->expect > seconds - 1)
				c->expect = seconds - 1;
			if (c->expect >= lowest)
				missed += c->expect - lowest + 1;
			c->expect = lowest - 1;
			return viewer_finish(c) ? VIEWER_DONE : VIEWER_OTHER;
		}
		if (c->expect > seconds - 1)
			c->expect = seconds - 1;
		if (r < c->expect)
			missed += c->expect - r;
		c->expect = r - 1;
		c->ticks++;
		ticks_in_range++;
		long long due_us = (c->ends_at - (long long)r * 1000) * 1000;
		record_lag(t - due_us);
		int slot = seconds - 1 - r;
		if (slot >= 0 && slot < MAX_TICKS) {
			long long lag = t - due_us;
			if (!tick_count[slot] || lag < tick_min[slot])
				tick_min[slot] = lag;
			if (lag > tick_max[slot])
				tick_max[slot] = lag;
			tick_count[slot]++;
			tick_sum[slot] += lag;
		}
		if (r == lowest)
			return viewer_finish(c) ? VIEWER_DONE : VIEWER_OTHER;
		return VIEWER_OTHER;
	}
	if (rest >= 3 && !memcmp(type, "ack", 3))
		acks++;
	else if (rest >= 5 && !memcmp(type, "error", 5))
		errors_rx++;
	else
		other_frames++;
	return VIEWER_OTHER;
}

/* Whatever a viewer had not received by the end (closed, failed, or too late): missed. */
VT_FN long long viewer_unreceived(const struct viewer *c)
{
	int lowest = seconds - n_ticks;
	int top = c->expect > seconds - 1 ? seconds - 1 : c->expect;
	return top >= lowest ? top - lowest + 1 : 0;
}

/* The report's tail from the lag figures on, after a comma:
 * "lag_count":..,"hist":[..],"per_tick":[..] and the closing brace. */
VT_FN void print_lag_report(void)
{
	printf("\"lag_count\":%lld,\"lag_min_us\":%lld,\"lag_max_us\":%lld,\"hist\":[", lag_count,
	       lag_count ? lag_min_us : 0, lag_max_us);
	print_hist(hist);
	printf("],\"per_tick\":[");
	for (int k = 0; k < n_ticks && k < MAX_TICKS; k++)
		printf("%s[%d,%lld,%lld,%lld,%lld]", k ? "," : "", seconds - 1 - k, tick_count[k],
		       tick_min[k], tick_count[k] ? tick_sum[k] / tick_count[k] : 0, tick_max[k]);
	printf("]}\n");
	fflush(stdout);
}

#endif
