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

/** The QR code of `link` in `img`, drawn by the server; none for no link. */
export function showQr(img, link) {
  // A link longer than the server draws (a very long host name) gets no code, not a broken image.
  const drawable = Boolean(link) && new TextEncoder().encode(link).length <= CONTRACT.qrTextMaxBytes;
  img.hidden = !drawable;
  if (!drawable) return;
  const src = `qr.svg?text=${encodeURIComponent(link)}`;
  if (img.getAttribute("src") !== src) img.setAttribute("src", src);
}

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
