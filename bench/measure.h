/*
 * measure.h: what bench's C load clients share whatever they measure: the
 * clocks, log-linear latency histograms (64 sub-buckets per power of two,
 * ~1.6 % resolution, listed as [lower_us, count] so bench/run can merge
 * processes), a key lookup for flat JSON, and the source addresses.
 * Header-only: each client is one translation unit.
 */
#ifndef BENCH_MEASURE_H
#define BENCH_MEASURE_H

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

#define HBUCKETS 4096

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

/* --src-first and --src-last name a range of 127.0.0.x. */
VT_FN int sources_valid(void)
{
	return src_first <= src_last && src_last - src_first < 255;
}

/* One numeric option in a client's `else if` chain over argv (a, its value v, index i). */
#define OPT(name, var) else if (!strcmp(a, name) && v) { var = atoi(v); i++; }

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

#endif
