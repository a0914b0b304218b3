// The parts of libwebsockets 4.1.6 that Swift cannot import directly (macros,
// multi-bit option values), wrapped as static inline functions. Nothing else.
// The libev loop lws runs on is module CLibev's, lent to lws as a foreign loop.
#ifndef COUNTDOWN_LWS_SHIM_H
#define COUNTDOWN_LWS_SHIM_H

#include <libwebsockets.h>
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
/// A request lws's HTTP parser cannot take (a method it does not know, a line
/// that is not a request) is handed to the vhost's first protocol as a raw
/// socket (LWS_CALLBACK_RAW_*), instead of lws answering it with its own page.
static inline uint64_t cds_option_fallback_to_raw(void) {
  return LWS_SERVER_OPTION_FALLBACK_TO_APPLY_LISTEN_ACCEPT_CONFIG;
}
/// Run on libev through lws's event-library plugin (libwebsockets-evlib_ev.so).
static inline uint64_t cds_option_libev(void) { return LWS_SERVER_OPTION_LIBEV; }

/// Marks an HTTP/1 transaction as the connection's last, so that lws closes
/// the connection when it ends instead of keeping it for another request.
/// lws 4.1.6 has no setter for this: the one public call that sets
/// `wsi->http.conn_type` to close is lws_add_http_common_headers with no
/// content length (lib/roles/http/header.c:199-217), so it is made into a
/// scratch buffer whose bytes are dropped; the answer's own headers are
/// written later as usual. Pipelined requests are why (see docs/operating.md).
static inline int cds_http_close_after_transaction(struct lws *wsi) {
  unsigned char scratch[4096];
  unsigned char *cursor = scratch, *end = scratch + sizeof(scratch) - 1;
  return lws_add_http_common_headers(wsi, 200, "application/octet-stream",
                                     LWS_ILLEGAL_HTTP_CONTENT_LEN, &cursor, end);
}

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

#endif
