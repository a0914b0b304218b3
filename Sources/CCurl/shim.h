// The parts of libcurl that Swift cannot call directly: curl_easy_setopt and
// curl_easy_getinfo are variadic, and curl_multi_info_read returns a struct
// with a union. Each wrapper takes the one type its option needs. Nothing else.
#ifndef COUNTDOWN_CURL_SHIM_H
#define COUNTDOWN_CURL_SHIM_H

#include <curl/curl.h>

/// A response body is not read: the status says delivered or not.
static inline size_t cdc_discard_body(char *data, size_t size, size_t count, void *context) {
  (void)data;
  (void)context;
  return size * count;
}

/// One POST: the URL, the body (copied, so the caller's buffer may go), the
/// headers, this transfer's tag, and the whole-transfer timeout. No signals
/// (the handle lives on a thread that is not the main one), no redirects, and
/// no protocol but http and https.
static inline CURLcode cdc_easy_prepare(
    CURL *easy, const char *url, const void *body, long length, struct curl_slist *headers,
    long tag, long timeoutMs) {
  CURLcode code = CURLE_OK;
  if ((code = curl_easy_setopt(easy, CURLOPT_URL, url)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https")) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_POST, 1L)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, length)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_PRIVATE, (void *)tag)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeoutMs)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, cdc_discard_body)) != CURLE_OK)
    return code;
  return CURLE_OK;
}

/// Verifies https peers against the CA certificates in `path` (PEM) rather
/// than the system's bundle: a receiver signed by an operator's own CA.
static inline CURLcode cdc_easy_trust(CURL *easy, const char *path) {
  return curl_easy_setopt(easy, CURLOPT_CAINFO, path);
}

/// The tag `cdc_easy_prepare` gave the transfer.
static inline long cdc_easy_tag(CURL *easy) {
  char *tag = NULL;
  curl_easy_getinfo(easy, CURLINFO_PRIVATE, &tag);
  return (long)tag;
}

/// The HTTP status of the last response, 0 when none came.
static inline long cdc_easy_status(CURL *easy) {
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

/// The next finished transfer's handle and result; 0 when none is left.
static inline int cdc_multi_next_done(CURLM *multi, CURL **easy, CURLcode *result) {
  int left = 0;
  CURLMsg *message;
  while ((message = curl_multi_info_read(multi, &left)) != NULL) {
    if (message->msg == CURLMSG_DONE) {
      *easy = message->easy_handle;
      *result = message->data.result;
      return 1;
    }
  }
  return 0;
}

/// A connection and nothing more (CURLOPT_CONNECT_ONLY): curl resolves, connects and, for
/// https, verifies the peer (against `caFile` when not NULL) and shakes hands; the caller
/// then speaks HTTP itself through curl_easy_send and curl_easy_recv. No signals, and no
/// protocol but http and https.
static inline CURLcode cdc_easy_connect_only(
    CURL *easy, const char *url, const char *caFile, long timeoutMs) {
  CURLcode code = CURLE_OK;
  if ((code = curl_easy_setopt(easy, CURLOPT_URL, url)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https")) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_CONNECT_ONLY, 1L)) != CURLE_OK) return code;
  if ((code = curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, timeoutMs)) != CURLE_OK) return code;
  if (caFile != NULL && (code = curl_easy_setopt(easy, CURLOPT_CAINFO, caFile)) != CURLE_OK)
    return code;
  return CURLE_OK;
}

/// The connected socket of a connect-only handle, -1 when there is none.
static inline int cdc_easy_socket(CURL *easy) {
  curl_socket_t socket = CURL_SOCKET_BAD;
  if (curl_easy_getinfo(easy, CURLINFO_ACTIVESOCKET, &socket) != CURLE_OK) return -1;
  return socket == CURL_SOCKET_BAD ? -1 : (int)socket;
}

/// Once per process, before any thread uses libcurl (its flags are macros).
static inline CURLcode cdc_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

#endif
