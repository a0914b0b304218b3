// The Share panel's own widgets: the link fields with their Copy buttons, and
// the QR codes. What the links are and who may see them is app.js's to say
// (shareLinks and controlView in logic.js); this only shows them.

import { CONTRACT } from "./constants.js";
import { setText } from "./dom.js";

const COPIED_MS = 2000; // how long a Copy button says "Copied"

/** Puts each link in its field: [input, link] pairs, where no link empties the field. */
export function showLinks(pairs) {
  for (const [input, value] of pairs) {
    if (input.value !== (value ?? "")) input.value = value ?? "";
  }
}

/**
 * The QR code of `link` in `img`, drawn by the server; none for no link. A
 * `secret` link (the controller link, with its key) never goes in a URL, where
 * proxy logs and shared caches would keep it: its code is asked for by POST,
 * with the link as the body, and shown from a data: URL.
 */
export function showQr(img, link, secret = false) {
  // A link longer than the server draws (a very long host name) gets no code, not a broken image.
  const drawable = Boolean(link) && new TextEncoder().encode(link).length <= CONTRACT.qrTextMaxBytes;
  if (!drawable || !secret) secretQr.delete(img);
  img.hidden = !drawable;
  if (!drawable) return;
  if (!secret) {
    const src = `qr.svg?text=${encodeURIComponent(link)}`;
    if (img.getAttribute("src") !== src) img.setAttribute("src", src);
    return;
  }
  if (secretQr.get(img)?.asked === link) return;
  const state = { asked: link };
  secretQr.set(img, state);
  // No code until this link's arrives: never the one of a key rotated away. The
  // image keeps its size (CSS), so the panel does not grow under the reader.
  img.removeAttribute("src");
  fetch("qr.svg", {
    method: "POST",
    body: link,
    cache: "no-store",
    headers: { "content-type": "text/plain; charset=utf-8" },
  })
    .then((answer) => {
      if (!answer.ok) throw new Error(answer.headers.get("retry-after") ?? "1");
      return answer.text();
    })
    .then((svg) => {
      if (secretQr.get(img) !== state) return; // the link changed (a new key), or the panel closed
      img.setAttribute("src", `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`);
    })
    .catch((error) => {
      // Refused (429: too many codes drawn from this address) or lost: asked again
      // when the server says, if the panel still shows this link.
      const seconds = Math.min(60, Math.max(1, Number(error.message) || 1));
      setTimeout(() => {
        if (secretQr.get(img) !== state) return;
        secretQr.delete(img);
        showQr(img, link, true);
      }, seconds * 1000);
    });
}

// Per image, the secret link whose code was last asked for.
const secretQr = new WeakMap();

/**
 * Wires the panel's Copy buttons (each button[data-copy] names its field) and
 * has a click or the focus on a field select the whole link. `status` is the
 * live region that says whether the copy worked; `strings` the page's words.
 */
export function wireCopy(panel, fields, status, strings) {
  const timers = new Map(); // per button, the moment it says "Copy" again
  const showCopied = (button, copied) => {
    clearTimeout(timers.get(button));
    status.textContent = ""; // so the same words are announced again
    if (copied) setText(button, strings.copied);
    setText(status, copied ? strings.copied : strings.copyManually);
    timers.set(
      button,
      setTimeout(() => {
        setText(button, strings.copy);
        if (status.textContent === strings.copied) setText(status, "");
      }, COPIED_MS),
    );
  };
  for (const button of panel.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const input = document.getElementById(button.dataset.copy);
      if (input?.value) showCopied(button, await copy(input));
    });
  }
  const selectAll = (ev) => ev.currentTarget.select();
  for (const input of fields) {
    input.addEventListener("focus", selectAll);
    input.addEventListener("click", selectAll);
  }
}

// The Clipboard API where the page may use it (a secure context, such as
// https:// or localhost); otherwise the link is selected and copied the old
// way, or left selected for the user to copy. Resolves to whether it copied.
async function copy(input) {
  const text = input.value;
  if (window.isSecureContext && navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, document not focused): fall back below.
    }
  }
  input.focus();
  input.select();
  try {
    return document.execCommand("copy");
  } catch {
    return false;
  }
}
