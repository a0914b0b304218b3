// Why this page cannot connect, when the reason is its own address.
//
// A browser tells a page nothing about a refused WebSocket upgrade: a 403
// closes as 1006, the same as a server that is down. So when a socket closes
// before its first snapshot, the page asks the server once, by POST (a
// browser sends Origin on every POST), whether its origin may connect, and
// if not, says so in words that name the flag the operator needs
// (originRefused in i18n.js).

import { STRINGS } from "./i18n.js";

export const ORIGIN_CHECK_PATH = "/origin-check";

/**
 * The sentence for the server's answer to the origin check, or null when
 * the origin is allowed (the trouble is elsewhere) or the answer is not one.
 * @param {unknown} answer the parsed JSON of POST /origin-check
 * @param {string} lang a key of STRINGS
 * @param {string} pageOrigin location.origin, used when the server could not read ours
 */
export function refusalText(answer, lang, pageOrigin) {
  if (!answer || typeof answer !== "object" || answer.allowed !== false) return null;
  const origin = typeof answer.origin === "string" ? answer.origin : pageOrigin;
  const words = (STRINGS[lang] ?? STRINGS.en).originRefused;
  return words.replaceAll("{origin}", origin);
}

let asked = false;

/**
 * Asks the server, once per page, whether this page's origin is refused.
 * Resolves to the sentence to show, or null. Never rejects: a failed check
 * leaves the page's usual "reconnecting" words.
 * @param {string} lang
 * @param {(url: string, init: object) => Promise<Response>} [fetcher]
 * @param {string} [pageOrigin]
 */
export async function whyRefused(lang, fetcher = fetch, pageOrigin = globalThis.location?.origin ?? "") {
  if (asked) return null;
  asked = true;
  try {
    const response = await fetcher(ORIGIN_CHECK_PATH, { method: "POST", cache: "no-store" });
    if (!response.ok) return null;
    return refusalText(await response.json(), lang, pageOrigin);
  } catch {
    asked = false; // the server is down: ask again on a later failure
    return null;
  }
}
