// The chime at zero: a short sound shipped with the page (chime.wav, made by
// scripts/make-chime), played through the Web Audio API.
//
// Browsers let a page make sound only after a user gesture on it (the
// autoplay rules), so the AudioContext is created in one: the click on the
// toggle that turns the chime on, or, when the switch was left on by an
// earlier visit, the first click or key press on the page. Until then the
// chime is on but silent; nothing is created before a gesture.

import { CHIME_KEY, chimeOn } from "./views.js";

const SOUND_URL = "chime.wav";

export class Chime {
  constructor() {
    this.on = false;
    this.context = null;
    this.buffer = null;
    this.loading = null;
    try {
      this.on = chimeOn(localStorage.getItem(CHIME_KEY));
    } catch {
      // No storage: off, and a toggle lasts until a reload.
    }
    if (this.on) this.unlockOnGesture();
  }

  /** Turns the chime on or off; called from the toggle's click, which is the gesture. */
  toggle() {
    this.on = !this.on;
    try {
      localStorage.setItem(CHIME_KEY, this.on ? "on" : "off");
    } catch {
      // Remembered for this page only.
    }
    // Heard once when turned on, so the operator knows it works.
    if (this.on) this.unlock().then(() => this.play());
  }

  /** The first click or key press on the page unlocks a chime left on. */
  unlockOnGesture() {
    const once = () => {
      document.removeEventListener("pointerdown", once, true);
      document.removeEventListener("keydown", once, true);
      if (this.on) this.unlock();
    };
    document.addEventListener("pointerdown", once, true);
    document.addEventListener("keydown", once, true);
  }

  /** Creates (or resumes) the AudioContext, inside a gesture, and loads the sound once. */
  unlock() {
    const Context = globalThis.AudioContext ?? globalThis.webkitAudioContext;
    if (!Context) return Promise.resolve();
    try {
      this.context ??= new Context();
    } catch {
      return Promise.resolve(); // the browser refused one (too many, or no audio): silent
    }
    if (this.context.state === "suspended") this.context.resume().catch(() => {});
    this.loading ??= fetch(SOUND_URL)
      .then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error(`${SOUND_URL}: ${r.status}`))))
      .then((data) => this.context.decodeAudioData(data))
      .then((buffer) => {
        this.buffer = buffer;
      })
      .catch(() => {
        this.loading = null; // tried again at the next unlock
      });
    return this.loading;
  }

  /** Plays the sound now, if the chime is on and unlocked; otherwise nothing. */
  play() {
    if (!this.on || !this.context || !this.buffer) return false;
    const source = this.context.createBufferSource();
    source.buffer = this.buffer;
    source.connect(this.context.destination);
    source.start();
    return true;
  }
}
