// hiredis (async API and its libev adapter) and the parts of it that Swift
// cannot import directly: the adapter's functions are static, so each is
// wrapped as a static inline function here. Nothing else. The loop itself
// (creating, running, timers) is module CLibev's; the adapter's header pulls
// in <ev.h> only for its own watchers.
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

#endif
