// The parts of libwebsockets 4.1.6 and libev that Swift cannot import directly
// (macros, multi-bit option values), wrapped as static inline functions.
// Nothing else. libev appears here only as the loop lws runs on: LWSServer is
// the one module that sees it.
#ifndef COUNTDOWN_LWS_SHIM_H
#define COUNTDOWN_LWS_SHIM_H

#include <libwebsockets.h>
#include <ev.h>
#include <stdarg.h>
#include <stddef.h>

/// Bytes lws needs in front of every buffer passed to lws_write.
static inline size_t cds_lws_pre(void) { return LWS_PRE; }

static inline uint64_t cds_option_validate_utf8(void) { return LWS_SERVER_OPTION_VALIDATE_UTF8; }
static inline uint64_t cds_option_security_headers(void) {
  return LWS_SERVER_OPTION_HTTP_HEADERS_SECURITY_BEST_PRACTICES_ENFORCE;
}
static inline uint64_t cds_option_disable_ipv6(void) { return LWS_SERVER_OPTION_DISABLE_IPV6; }
/// Vhosts are created after the context, so a context that fails is the event
/// library and a vhost that fails is the listening socket.
static inline uint64_t cds_option_explicit_vhosts(void) {
  return LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
}
/// Run on libev through lws's event-library plugin (libwebsockets-evlib_ev.so).
static inline uint64_t cds_option_libev(void) { return LWS_SERVER_OPTION_LIBEV; }

/// One sorted-usec-list timer that carries a user pointer, because lws hands
/// a sul callback nothing but the sul itself. The sul must stay the first member.
typedef struct cds_timer {
  lws_sorted_usec_list_t sul;
  void *user;
} cds_timer_t;

static inline void *cds_timer_user(lws_sorted_usec_list_t *sul) {
  return ((cds_timer_t *)sul)->user;
}

/// lwsl_* are macros over the variadic _lws_log; Swift passes a plain string.
static inline void cds_log(int level, const char *message) { _lws_log(level, "%s\n", message); }

// MARK: libev, the loop the server creates and lends to lws as a foreign loop

/// A new loop on the best backend libev has here (epoll on Linux), or NULL.
/// Not the default loop: that one would also take over SIGCHLD.
static inline struct ev_loop *cds_ev_loop_new(void) { return ev_loop_new(EVFLAG_AUTO); }
static inline void cds_ev_loop_destroy(struct ev_loop *loop) { ev_loop_destroy(loop); }
/// Makes the ev_run inside lws_service return once the current callback ends.
static inline void cds_ev_break(struct ev_loop *loop) { ev_break(loop, EVBREAK_ALL); }
static inline const char *cds_ev_backend_name(struct ev_loop *loop) {
  switch (ev_backend(loop)) {
  case EVBACKEND_EPOLL: return "epoll";
  case EVBACKEND_POLL: return "poll";
  case EVBACKEND_SELECT: return "select";
  default: return "other";
  }
}

/// A one-shot libev timer that calls `fire(user)`. lws 4.1.6 cannot bring its
/// own libev timer forward: it re-arms it with ev_timer_set on a watcher that
/// may still be active, which libev ignores, so an lws_sul scheduled earlier
/// than the pending one, from outside lws's timer callback, fires late.
typedef struct cds_ev_timer {
  ev_timer watcher; /* first: the callback recovers the struct from it */
  void (*fire)(void *user);
  void *user;
} cds_ev_timer_t;

static inline void cds_ev_timer_fired(struct ev_loop *loop, ev_timer *watcher, int revents) {
  (void)loop;
  (void)revents;
  cds_ev_timer_t *timer = (cds_ev_timer_t *)watcher;
  timer->fire(timer->user);
}

static inline void cds_ev_timer_init(cds_ev_timer_t *timer, void (*fire)(void *), void *user) {
  ev_init(&timer->watcher, cds_ev_timer_fired);
  timer->fire = fire;
  timer->user = user;
}

/// (Re)arms the timer `seconds` from now, earlier or later than before.
static inline void cds_ev_timer_arm(struct ev_loop *loop, cds_ev_timer_t *timer, double seconds) {
  ev_timer_stop(loop, &timer->watcher);
  // The loop's clock is read once per iteration; a long callback makes it stale.
  ev_now_update(loop);
  ev_timer_set(&timer->watcher, seconds, 0.);
  ev_timer_start(loop, &timer->watcher);
}

static inline void cds_ev_timer_stop(struct ev_loop *loop, cds_ev_timer_t *timer) {
  ev_timer_stop(loop, &timer->watcher);
}

/// Two watchers around libev's wait: `woke(user)` runs right after it returns
/// (ev_check), `sleeping(user)` right before the next (ev_prepare), so the
/// time between them is one iteration's work. Both are unref'd, so they never
/// keep the loop alive on their own.
typedef struct cds_ev_loop_clock {
  ev_check check; /* first: its callback recovers the struct from it */
  ev_prepare prepare;
  void (*woke)(void *user);
  void (*sleeping)(void *user);
  void *user;
} cds_ev_loop_clock_t;

static inline void cds_ev_loop_clock_woke(struct ev_loop *loop, ev_check *watcher, int revents) {
  (void)loop;
  (void)revents;
  cds_ev_loop_clock_t *clock = (cds_ev_loop_clock_t *)watcher;
  clock->woke(clock->user);
}

static inline void cds_ev_loop_clock_sleeping(struct ev_loop *loop, ev_prepare *watcher,
                                              int revents) {
  (void)loop;
  (void)revents;
  cds_ev_loop_clock_t *clock =
      (cds_ev_loop_clock_t *)((char *)watcher - offsetof(cds_ev_loop_clock_t, prepare));
  clock->sleeping(clock->user);
}

static inline void cds_ev_loop_clock_start(struct ev_loop *loop, cds_ev_loop_clock_t *clock,
                                           void (*woke)(void *), void (*sleeping)(void *),
                                           void *user) {
  clock->woke = woke;
  clock->sleeping = sleeping;
  clock->user = user;
  ev_check_init(&clock->check, cds_ev_loop_clock_woke);
  ev_prepare_init(&clock->prepare, cds_ev_loop_clock_sleeping);
  ev_check_start(loop, &clock->check);
  ev_prepare_start(loop, &clock->prepare);
  ev_unref(loop);
  ev_unref(loop);
}

static inline void cds_ev_loop_clock_stop(struct ev_loop *loop, cds_ev_loop_clock_t *clock) {
  ev_ref(loop);
  ev_ref(loop);
  ev_check_stop(loop, &clock->check);
  ev_prepare_stop(loop, &clock->prepare);
}

#endif
