/*
 * viewer_ticks.h: what bench's load clients measure on a viewer, whatever the
 * transport (loadclient.c on WebSocket, sseclient.c on Server-Sent Events), so
 * that a missed tick means the same on both: the lag histogram, the per-tick
 * rows, the accounting of one countdown.v1 JSON message, the counts over the
 * viewers and the report's shared part. Header-only, state in statics: each
 * client is one translation unit.
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

#include "measure.h"

/* One viewer's view of the countdown. */
struct viewer {
	long long ends_at; /* ms, 0 unknown */
	int got_snapshot;
	int last_r; /* last tick's r, or big */
	int ticks;  /* ticks received within the measured range */
	int done;
	int expect; /* next r expected */
};

static unsigned long long hist[HBUCKETS];
/* per measured tick (index seconds-1-r): count, min and max lag */
#define MAX_TICKS 4096
static long long tick_count[MAX_TICKS], tick_min[MAX_TICKS], tick_max[MAX_TICKS], tick_sum[MAX_TICKS];

static int seconds = 3600, n_ticks = 10;
static int going; /* after "go": frames count in the window, ticks are measured */
static long long lag_max_us = -1, lag_min_us = 1LL << 62, lag_count;
static long long frames_window, frames_total, ticks_in_range, missed, out_of_order, viewers_patches;
static long long bytes_window, acks, errors_rx, other_frames;

VT_FN void record_lag(long long lag)
{
	if (lag > lag_max_us)
		lag_max_us = lag;
	if (lag < lag_min_us)
		lag_min_us = lag;
	lag_count++;
	record_in(hist, lag);
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

/* ---- the client's counts over its viewers, in the report every viewer client prints */

static int n_conns = 1000, offset;
static int reported, connected, snapshots, conn_errors, closed_after_open, failed;
static int done_count, measuring; /* viewers measured since "go", and how many are done */
static long long t_begin_us, t_all_snapshots_us, t_go_us, t_end_us, t_first_snapshot_us;
static double cpu_go, cpu_ready;

static void report(void); /* each client's own: its report, then print_lag_report() */

VT_FN void check_finished(void)
{
	if (going && !reported && done_count >= measuring)
		report();
}

/* Accounts one message of viewer v received at t, and ends the run when every
 * measured viewer has its ticks. Returns what the message was to the viewer. */
VT_FN enum viewer_event viewer_received(struct viewer *v, const char *text, size_t len, long long t)
{
	enum viewer_event event = viewer_message(v, text, len, t);
	if (event == VIEWER_FIRST_SNAPSHOT) {
		snapshots++;
		if (snapshots == 1)
			t_first_snapshot_us = t;
		if (snapshots + failed >= n_conns && !t_all_snapshots_us)
			t_all_snapshots_us = t;
	} else if (event == VIEWER_DONE) {
		done_count++;
		check_finished();
	}
	return event;
}

/* A viewer's connection ended: after "go", it is measured as far as it got. */
VT_FN void viewer_gone(struct viewer *v)
{
	if (going && viewer_finish(v)) {
		done_count++;
		check_finished();
	}
}

/* The viewer options every viewer client takes make sense together. */
VT_FN int viewer_options_valid(int port)
{
	return port && n_conns >= 1 && n_ticks >= 1 && n_ticks < seconds && sources_valid();
}

/* Whatever a viewer had not received by the end (closed, failed, or too late): missed. */
VT_FN long long viewer_unreceived(const struct viewer *c)
{
	int lowest = seconds - n_ticks;
	int top = c->expect > seconds - 1 ? seconds - 1 : c->expect;
	return top >= lowest ? top - lowest + 1 : 0;
}

/* The report's head, every figure but the lag's, with a trailing comma: a client
 * adds its own figures, then print_lag_report(). `unreceived`: the sum of
 * viewer_unreceived over the viewers. */
VT_FN void print_viewer_report(int per_session, long long unreceived)
{
	reported = 1;
	t_end_us = now_us();
	double cpu_end = cpu_seconds();
	long long expected = (long long)n_conns * n_ticks;
	printf("{\"viewers\":%d,\"offset\":%d,\"per_session\":%d,\"connected\":%d,"
	       "\"snapshots\":%d,\"connect_errors\":%d,\"failed\":%d,\"closed_after_open\":%d,"
	       "\"t_first_snapshot_ms\":%.3f,\"t_all_snapshots_ms\":%.3f,"
	       "\"go_us\":%lld,\"end_us\":%lld,\"window_s\":%.3f,"
	       "\"frames_total\":%lld,\"frames_window\":%lld,\"bytes_window\":%lld,"
	       "\"ticks_expected\":%lld,\"ticks_received\":%lld,\"missed\":%lld,"
	       "\"out_of_order\":%lld,\"viewers_patches\":%lld,\"acks\":%lld,\"errors\":%lld,"
	       "\"cpu_connect_s\":%.3f,\"cpu_window_s\":%.3f,\"cpu_total_s\":%.3f,"
	       "\"rss_kb\":%ld,\"hwm_kb\":%ld,",
	       n_conns, offset, per_session, connected, snapshots, conn_errors, failed,
	       closed_after_open, t_first_snapshot_us ? (t_first_snapshot_us - t_begin_us) / 1e3 : -1.0,
	       t_all_snapshots_us ? (t_all_snapshots_us - t_begin_us) / 1e3 : -1.0,
	       t_go_us, t_end_us, going ? (t_end_us - t_go_us) / 1e6 : 0.0,
	       frames_total, frames_window, bytes_window,
	       going ? expected : 0, ticks_in_range, going ? missed + unreceived : 0,
	       out_of_order, viewers_patches, acks, errors_rx,
	       cpu_ready, going ? cpu_end - cpu_go : 0.0, cpu_end, rss_kb("VmRSS:"), rss_kb("VmHWM:"));
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
