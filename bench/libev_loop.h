/*
 * libev_loop.h: the one way bench's C programs lend lws a libev loop of
 * their own (a foreign loop, as countdown-server does, so that signals stay
 * the program's). Header-only: each program is one translation unit.
 */
#ifndef BENCH_LIBEV_LOOP_H
#define BENCH_LIBEV_LOOP_H

#include <ev.h>
#include <libwebsockets.h>
#include <stdio.h>

/* Points `info` at a new libev loop held in `foreign` (two slots, which must
 * outlive lws_create_context). NULL, with a message naming `program`, if
 * libev could not make one. */
static inline struct ev_loop *lend_libev_loop(struct lws_context_creation_info *info,
					      void *foreign[2], const char *program)
{
	struct ev_loop *l = ev_loop_new(EVFLAG_AUTO);
	if (!l) {
		fprintf(stderr, "%s: ev_loop_new failed\n", program);
		return NULL;
	}
	foreign[0] = l;
	foreign[1] = NULL;
	info->foreign_loops = foreign;
	info->options |= LWS_SERVER_OPTION_LIBEV;
	return l;
}

#endif
