// The parts of libev (Debian's libev-dev) that Swift cannot import directly:
// watcher set-up and loop control are macros, so each is wrapped as a static
// inline function here, with one trampoline per watcher kind. Nothing else.
// Only the Swift module Libev imports this.
#ifndef COUNTDOWN_LIBEV_SHIM_H
#define COUNTDOWN_LIBEV_SHIM_H

#include <ev.h>
#include <stddef.h>

/// A new loop on the best backend libev has here (epoll on Linux), or NULL.
/// Not the default loop: that one would also take over SIGCHLD.
static inline struct ev_loop *cev_loop_new(void) { return ev_loop_new(EVFLAG_AUTO); }
static inline void cev_loop_destroy(struct ev_loop *loop) { ev_loop_destroy(loop); }
/// Waits for and handles one round of events.
static inline void cev_run_once(struct ev_loop *loop) { ev_run(loop, EVRUN_ONCE); }
/// Makes the running ev_run return once the current callback ends.
static inline void cev_break(struct ev_loop *loop) { ev_break(loop, EVBREAK_ALL); }
static inline const char *cev_backend_name(struct ev_loop *loop) {
  switch (ev_backend(loop)) {
  case EVBACKEND_EPOLL: return "epoll";
  case EVBACKEND_POLL: return "poll";
  case EVBACKEND_SELECT: return "select";
  default: return "other";
  }
}

/// A one-shot timer that calls `fire(user)`.
typedef struct cev_timer {
  ev_timer watcher; /* first: the callback recovers the struct from it */
  void (*fire)(void *user);
  void *user;
} cev_timer_t;

static inline void cev_timer_fired(struct ev_loop *loop, ev_timer *watcher, int revents) {
  (void)loop;
  (void)revents;
  cev_timer_t *timer = (cev_timer_t *)watcher;
  timer->fire(timer->user);
}

static inline void cev_timer_init(cev_timer_t *timer, void (*fire)(void *), void *user) {
  ev_init(&timer->watcher, cev_timer_fired);
  timer->fire = fire;
  timer->user = user;
}

/// (Re)arms the timer `seconds` from now, earlier or later than before.
static inline void cev_timer_arm(struct ev_loop *loop, cev_timer_t *timer, double seconds) {
  ev_timer_stop(loop, &timer->watcher);
  // The loop's clock is read once per iteration; a long callback makes it stale.
  ev_now_update(loop);
  ev_timer_set(&timer->watcher, seconds, 0.);
  ev_timer_start(loop, &timer->watcher);
}

static inline void cev_timer_stop(struct ev_loop *loop, cev_timer_t *timer) {
  ev_timer_stop(loop, &timer->watcher);
}

/// Two watchers around libev's wait: `woke(user)` runs right after it returns
/// (ev_check), `sleeping(user)` right before the next (ev_prepare), so the
/// time between them is one iteration's work. Both are unref'd, so they never
/// keep the loop alive on their own.
typedef struct cev_iteration {
  ev_check check; /* first: its callback recovers the struct from it */
  ev_prepare prepare;
  void (*woke)(void *user);
  void (*sleeping)(void *user);
  void *user;
} cev_iteration_t;

static inline void cev_iteration_woke(struct ev_loop *loop, ev_check *watcher, int revents) {
  (void)loop;
  (void)revents;
  cev_iteration_t *iteration = (cev_iteration_t *)watcher;
  iteration->woke(iteration->user);
}

static inline void cev_iteration_sleeping(struct ev_loop *loop, ev_prepare *watcher,
                                          int revents) {
  (void)loop;
  (void)revents;
  cev_iteration_t *iteration =
      (cev_iteration_t *)((char *)watcher - offsetof(cev_iteration_t, prepare));
  iteration->sleeping(iteration->user);
}

static inline void cev_iteration_start(struct ev_loop *loop, cev_iteration_t *iteration,
                                       void (*woke)(void *), void (*sleeping)(void *),
                                       void *user) {
  iteration->woke = woke;
  iteration->sleeping = sleeping;
  iteration->user = user;
  ev_check_init(&iteration->check, cev_iteration_woke);
  ev_prepare_init(&iteration->prepare, cev_iteration_sleeping);
  ev_check_start(loop, &iteration->check);
  ev_prepare_start(loop, &iteration->prepare);
  ev_unref(loop);
  ev_unref(loop);
}

static inline void cev_iteration_stop(struct ev_loop *loop, cev_iteration_t *iteration) {
  ev_ref(loop);
  ev_ref(loop);
  ev_check_stop(loop, &iteration->check);
  ev_prepare_stop(loop, &iteration->prepare);
}

#endif
