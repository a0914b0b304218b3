// hiredis (async API and its libev adapter) and the parts of libev that
// Swift cannot import directly: the adapter's functions are static and
// libev's watcher set-up is macros, so each is wrapped as a static inline
// function here. Nothing else.
#ifndef COUNTDOWN_HIREDIS_SHIM_H
#define COUNTDOWN_HIREDIS_SHIM_H

#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libev.h>

static inline int cdh_libev_attach(struct ev_loop *loop, redisAsyncContext *context) {
  return redisLibevAttach(loop, context);
}

/// hiredis 0.14 only offers keepalive on the context inside the async one.
static inline int cdh_enable_keepalive(redisAsyncContext *context) {
  return redisEnableKeepAlive(&context->c);
}

static inline struct ev_loop *cdh_loop_new(void) { return ev_loop_new(EVFLAG_AUTO); }
static inline void cdh_loop_destroy(struct ev_loop *loop) { ev_loop_destroy(loop); }
/// Runs until no watcher is active or `cdh_loop_break` is called.
static inline void cdh_loop_run(struct ev_loop *loop) { ev_run(loop, 0); }
/// Waits for and handles one round of events.
static inline void cdh_loop_run_once(struct ev_loop *loop) { ev_run(loop, EVRUN_ONCE); }
static inline void cdh_loop_break(struct ev_loop *loop) { ev_break(loop, EVBREAK_ALL); }

/// A one-shot libev timer that calls `fire(user)`; the watcher comes first
/// so the callback recovers the struct from it.
typedef struct cdh_timer {
  ev_timer watcher;
  void (*fire)(void *user);
  void *user;
} cdh_timer_t;

static inline void cdh_timer_fired(struct ev_loop *loop, ev_timer *watcher, int events) {
  (void)loop;
  (void)events;
  cdh_timer_t *timer = (cdh_timer_t *)watcher;
  timer->fire(timer->user);
}

static inline void cdh_timer_init(cdh_timer_t *timer, void (*fire)(void *), void *user) {
  ev_timer_init(&timer->watcher, cdh_timer_fired, 0., 0.);
  timer->fire = fire;
  timer->user = user;
}

static inline void cdh_timer_start(struct ev_loop *loop, cdh_timer_t *timer, double seconds) {
  ev_timer_stop(loop, &timer->watcher);
  ev_timer_set(&timer->watcher, seconds, 0.);
  ev_timer_start(loop, &timer->watcher);
}

static inline void cdh_timer_stop(struct ev_loop *loop, cdh_timer_t *timer) {
  ev_timer_stop(loop, &timer->watcher);
}

/// Wakes a loop from another thread: `fire(user)` then runs on the loop's thread.
typedef struct cdh_async {
  ev_async watcher;
  void (*fire)(void *user);
  void *user;
} cdh_async_t;

static inline void cdh_async_fired(struct ev_loop *loop, ev_async *watcher, int events) {
  (void)loop;
  (void)events;
  cdh_async_t *async = (cdh_async_t *)watcher;
  async->fire(async->user);
}

static inline void cdh_async_start(
    struct ev_loop *loop, cdh_async_t *async, void (*fire)(void *), void *user) {
  ev_async_init(&async->watcher, cdh_async_fired);
  async->fire = fire;
  async->user = user;
  ev_async_start(loop, &async->watcher);
}

static inline void cdh_async_send(struct ev_loop *loop, cdh_async_t *async) {
  ev_async_send(loop, &async->watcher);
}

static inline void cdh_async_stop(struct ev_loop *loop, cdh_async_t *async) {
  ev_async_stop(loop, &async->watcher);
}

#endif
