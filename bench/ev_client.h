/*
 * ev_client.h: what bench's plain-socket HTTP clients (sseclient.c,
 * apiclient.c) share: a non-blocking connect from the next source address,
 * its outcome, a response header lookup, and libev's signal watchers for
 * "go" (SIGUSR1) and stop (SIGTERM, SIGINT). Header-only.
 */
#ifndef BENCH_EV_CLIENT_H
#define BENCH_EV_CLIENT_H

#include "measure.h"
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <strings.h>
#include <unistd.h>

/* A non-blocking socket connecting to `to` from the next source address, or -1. */
VT_FN int open_socket(const struct sockaddr_in *to)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	bind_next_source(fd);
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The server's address from --host (an IPv4 literal) and --port; 0 if --host is not one. */
VT_FN int server_address(struct sockaddr_in *out, const char *host, int port)
{
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((unsigned short)port);
	return inet_pton(AF_INET, host, &out->sin_addr) == 1;
}

/* How the connect of a socket that became writable ended: 0, or its errno. */
VT_FN int socket_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return errno;
	return err;
}

/* A header's value, if `name` (with its colon; any case) starts one of the header lines. */
VT_FN const char *header(const char *head, size_t len, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = head; p && p + nl < head + len;) {
		if (!strncasecmp(p, name, nl)) {
			p += nl;
			while (*p == ' ')
				p++;
			return p;
		}
		p = memchr(p, '\n', (size_t)(head + len - p));
		if (p)
			p++;
	}
	return NULL;
}

static ev_signal sig_go, sig_term, sig_int;

VT_FN void stop_loop(struct ev_loop *l, ev_signal *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(l, EVBREAK_ALL);
}

/* The default loop, with SIGUSR1 calling `go` and SIGTERM/SIGINT ending the loop. */
VT_FN struct ev_loop *client_loop(void (*go)(struct ev_loop *, ev_signal *, int))
{
	struct ev_loop *l = ev_default_loop(EVFLAG_AUTO);
	signal(SIGPIPE, SIG_IGN);
	ev_signal_init(&sig_go, go, SIGUSR1);
	ev_signal_init(&sig_term, stop_loop, SIGTERM);
	ev_signal_init(&sig_int, stop_loop, SIGINT);
	ev_signal_start(l, &sig_go);
	ev_signal_start(l, &sig_term);
	ev_signal_start(l, &sig_int);
	return l;
}

#endif
