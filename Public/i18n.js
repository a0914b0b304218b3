// The page's words, in its two languages, and the choice between them. Every
// sentence the page shows is here, keyed by name; the logic (logic.js) and the
// page (app.js, origin.js) take a table of them as an argument or look one up
// by key, and never hold words of their own. Numbers a sentence quotes come
// from CONTRACT (constants.js), so the words and the rules cannot disagree.

import { CONTRACT } from "./constants.js";
import { queryParams } from "./logic.js";

const MIN_SECONDS = CONTRACT.seconds.min;
const MAX_SECONDS = CONTRACT.seconds.max;

// A range a message quotes, from the contract: "1 second to 30 days".
const DAY_MS = 24 * 60 * 60 * 1000;
const UNTIL_MAX_DAYS = Math.floor(CONTRACT.untilAheadMs.max / DAY_MS);
const UNTIL_MIN_S = Math.ceil(CONTRACT.untilAheadMs.min / 1000);

/** The words, by language (see pickLang), then by name. */
export const STRINGS = {
  en: {
    title: "Countdown",
    start: "Start",
    resume: "Resume",
    pause: "Pause",
    paused: "Paused",
    cancel: "Cancel",
    minusMinute: "−1 min",
    plusMinute: "+1 min",
    runControls: "Countdown controls",
    seconds: "Seconds",
    until: "Until",
    startBy: "Count down",
    busy: "Counting down",
    waiting: "Waiting for the server",
    session: "Session",
    viewers: (n) => (n === 1 ? "1 viewer" : `${n} viewers`),
    connecting: "Connecting…",
    live: "Live",
    reconnecting: "Connection lost — reconnecting…",
    stale: "This server cannot confirm the countdown right now; it may be out of date.",
    closed: "Disconnected.",
    ended: "The server ended this session.",
    flooded: "The server closed the connection after too many requests — reconnecting…",
    full: "The server is full right now — trying again…",
    restarted: "The server restarted; the countdown shown before is gone.",
    noAnswer: "The server did not answer. Try again.",
    badSession: (raw) =>
      `“${raw}” is not a valid session name. Use 1–${CONTRACT.sessionIdMaxLength} letters, digits, “-” or “_”.`,
    badSeconds: `Enter a whole number of seconds from ${MIN_SECONDS} to ${MAX_SECONDS}.`,
    badUntil: {
      format: "Pick a date and a time.",
      near: `Pick a time at least ${UNTIL_MIN_S} second${UNTIL_MIN_S === 1 ? "" : "s"} from now.`,
      far: `Pick a time at most ${UNTIL_MAX_DAYS} days from now.`,
    },
    notConnected: "Not connected; try again in a moment.",
    ready: "Ready",
    finished: "Countdown finished",
    units: {
      days: (n) => (n === 1 ? "1 day" : `${n} days`),
      hours: (n) => (n === 1 ? "1 hour" : `${n} hours`),
      minutes: (n) => (n === 1 ? "1 minute" : `${n} minutes`),
      seconds: (n) => (n === 1 ? "1 second" : `${n} seconds`),
      joiner: ", ",
    },
    errors: {
      bad_json: "The server could not read that request.",
      bad_request: "The server did not accept that request.",
      busy: "This session is already counting down or waiting.",
      not_running: "No countdown is running.",
      not_paused: "The countdown is not paused.",
      rate_limited: "Too many requests. Wait a moment and try again.",
      forbidden: "Only this session's controllers can control the countdown.",
      too_many_sessions: "The server has too many sessions open right now. Trying again…",
      unavailable: "The server could not do that just now. Try again.",
      outcome_unknown: "The server could not tell whether that worked. Check the countdown before you try again.",
      not_waiting: "Nothing is waiting for a result.",
    },
    serverError: (msg) => `Server error: ${msg}`,
    viewOnly: "View only",
    viewOnlyDetail: "The host controls this countdown.",
    keyRejected: "The controller key in this link was not accepted.",
    share: "Share",
    viewerLink: "Viewer link",
    viewerLinkHint: "Watch only.",
    controllerLink: "Controller link",
    controllerLinkHint: "Anyone with this link can control the countdown. Give it only to co-hosts.",
    copy: "Copy",
    copied: "Copied",
    copyManually: "The link is selected: copy it from there.",
    duration: "Duration",
    durationHint: "For example 90, 10:00, 1:30:00, 90s, 10m or 1h",
    understood: (words) => `= ${words}`,
    badDuration: `Enter a time such as 90, 10:00, 1:30:00, 90s, 10m or 1h, from ${MIN_SECONDS} second to 24 hours.`,
    presets: "Presets",
    presetMinutes: (n) => `${n} min`,
    presetLabel: (n) => (n === 1 ? "1 minute" : `${n} minutes`),
    finishText: "Finish text (optional)",
    badFinish: {
      long: `The finish text can be at most ${CONTRACT.finishedLabelMaxLength} characters.`,
      control: "The finish text cannot hold control characters such as line breaks or tabs.",
    },
    confirmEnd: "End for everyone?",
    confirmYes: "Yes, end it",
    confirmNo: "No",
    waitingHost: "Waiting for the host",
    viewersLastKnown: (n) => `${n === 1 ? "1 viewer" : `${n} viewers`} (last known)`,
    pausedTitle: (clock) => `${clock} (paused)`,
    qrViewer: "QR code of the viewer link",
    qrController: "QR code of the controller link",
    showController: "Controller link, for co-hosts",
    openSession: "Open a session",
    sessionName: "Session name",
    open: "Open",
    newKey: "New controller link",
    newKeyHint: "Makes a new controller link. Everyone else who holds the current one stops being a controller.",
    confirmNewKey: "Cut off everyone else who has the controller link?",
    confirmNewKeyYes: "Yes, make a new link",
    newKeyDone: "A new controller link is ready. The old one no longer works.",
    originRefused: "This server does not accept pages from {origin}. Start it with --allow-origin {origin}",
    waitLabel: "Waiting",
    waitBusy: "Waiting for a result",
    elapsedWords: (text, time) => `${text}, ${time} elapsed`,
    done: "Done",
    fail: "Fail",
    outcomes: { done: "Done", failed: "Failed", timeout: "Timed out" },
    outcomeWords: (outcome, text) => `${outcome}: ${text}`,
    confirmDone: "Mark it done for everyone?",
    confirmDoneYes: "Yes, done",
    confirmFail: "Mark it failed for everyone?",
    confirmFailYes: "Yes, failed",
    waitControls: "Wait controls",
  },
  "zh-Hant": {
    title: "倒計時",
    start: "開始",
    resume: "繼續",
    pause: "暫停",
    paused: "已暫停",
    cancel: "取消",
    minusMinute: "−1 分",
    plusMinute: "+1 分",
    runControls: "倒計時控制",
    seconds: "秒數",
    until: "直到",
    startBy: "倒數方式",
    busy: "倒計時中",
    waiting: "等待伺服器回應",
    session: "場次",
    viewers: (n) => `${n} 位觀看者`,
    connecting: "連線中…",
    live: "已連線",
    reconnecting: "連線中斷，正在重新連線…",
    stale: "伺服器暫時無法確認倒計時，顯示的內容可能已過時。",
    closed: "已中斷連線。",
    ended: "伺服器結束了這個場次。",
    flooded: "請求太頻繁，伺服器關閉了連線，正在重新連線…",
    full: "伺服器目前已滿，正在重試…",
    restarted: "伺服器已重新啟動，先前的倒計時已不存在。",
    noAnswer: "伺服器沒有回應，請再試一次。",
    badSession: (raw) =>
      `「${raw}」不是有效的場次名稱。請使用 1–${CONTRACT.sessionIdMaxLength} 個英文字母、數字、「-」或「_」。`,
    badSeconds: `請輸入 ${MIN_SECONDS} 到 ${MAX_SECONDS} 之間的整數秒數。`,
    badUntil: {
      format: "請選擇日期和時間。",
      near: `請選擇至少 ${UNTIL_MIN_S} 秒之後的時間。`,
      far: `請選擇 ${UNTIL_MAX_DAYS} 天以內的時間。`,
    },
    notConnected: "尚未連線，請稍後再試。",
    ready: "準備就緒",
    finished: "倒計時結束",
    units: {
      days: (n) => `${n} 天`,
      hours: (n) => `${n} 小時`,
      minutes: (n) => `${n} 分`,
      seconds: (n) => `${n} 秒`,
      joiner: " ",
    },
    errors: {
      bad_json: "伺服器無法讀取這個請求。",
      bad_request: "伺服器不接受這個請求。",
      busy: "這個場次已在倒計時或等待中。",
      not_running: "目前沒有進行中的倒計時。",
      not_paused: "倒計時並未暫停。",
      rate_limited: "請求太頻繁，請稍候再試。",
      forbidden: "只有這個場次的主控者可以控制倒計時。",
      too_many_sessions: "伺服器目前開啟的場次太多，正在重試…",
      unavailable: "伺服器暫時無法執行，請再試一次。",
      outcome_unknown: "伺服器無法確認剛才的操作是否生效，請先查看倒計時再重試。",
      not_waiting: "目前沒有等待結果的工作。",
    },
    serverError: (msg) => `伺服器錯誤：${msg}`,
    viewOnly: "僅供觀看",
    viewOnlyDetail: "由主持人控制這個倒計時。",
    keyRejected: "這個連結中的主控金鑰未被接受。",
    share: "分享",
    viewerLink: "觀看連結",
    viewerLinkHint: "只能觀看。",
    controllerLink: "主控連結",
    controllerLinkHint: "持有這個連結的人都能控制倒計時，請只交給共同主持人。",
    copy: "複製",
    copied: "已複製",
    copyManually: "已選取連結，請從那裡複製。",
    duration: "時長",
    durationHint: "例如 90、10:00、1:30:00、90s、10m 或 1h",
    understood: (words) => `＝ ${words}`,
    badDuration: `請輸入時長，例如 90、10:00、1:30:00、90s、10m 或 1h，範圍 ${MIN_SECONDS} 秒到 24 小時。`,
    presets: "預設時長",
    presetMinutes: (n) => `${n} 分`,
    presetLabel: (n) => `${n} 分鐘`,
    finishText: "結束文字（選填）",
    badFinish: {
      long: `結束文字最多 ${CONTRACT.finishedLabelMaxLength} 個字元。`,
      control: "結束文字不能包含換行、定位字元等控制字元。",
    },
    confirmEnd: "要為所有人結束嗎？",
    confirmYes: "是，結束",
    confirmNo: "否",
    waitingHost: "等待主持人",
    viewersLastKnown: (n) => `${n} 位觀看者（最後已知）`,
    pausedTitle: (clock) => `${clock}（已暫停）`,
    qrViewer: "觀看連結的 QR 碼",
    qrController: "主控連結的 QR 碼",
    showController: "主控連結（給共同主持人）",
    openSession: "開啟場次",
    sessionName: "場次名稱",
    open: "開啟",
    newKey: "新的主控連結",
    newKeyHint: "產生新的主控連結，其他持有目前連結的人將不再是主控者。",
    confirmNewKey: "要讓其他持有主控連結的人失去控制嗎？",
    confirmNewKeyYes: "是，產生新連結",
    newKeyDone: "新的主控連結已產生，舊連結已失效。",
    originRefused: "此伺服器不接受來自 {origin} 的網頁。請以 --allow-origin {origin} 啟動伺服器",
    waitLabel: "等待中",
    waitBusy: "等待結果中",
    elapsedWords: (text, time) => `${text}，已過 ${time}`,
    done: "完成",
    fail: "失敗",
    outcomes: { done: "完成", failed: "失敗", timeout: "逾時" },
    outcomeWords: (outcome, text) => `${outcome}：${text}`,
    confirmDone: "要為所有人標記為完成嗎？",
    confirmDoneYes: "是，完成",
    confirmFail: "要為所有人標記為失敗嗎？",
    confirmFailYes: "是，失敗",
    waitControls: "等待控制",
  },
};

/**
 * Picks the UI language: ?lang= wins, then the browser's preferences, then
 * English. Traditional Chinese covers zh-Hant, zh-TW, zh-HK, zh-MO and bare zh.
 */
export function pickLang(search, navigatorLanguages = []) {
  const params = queryParams(search);
  const candidates = [params.get("lang"), ...navigatorLanguages].filter(Boolean);
  for (const tag of candidates) {
    const lang = matchLang(tag);
    if (lang) return lang;
  }
  return "en";
}

function matchLang(tag) {
  const t = String(tag).toLowerCase();
  if (t === "en" || t.startsWith("en-")) return "en";
  if (t === "zh" || t.startsWith("zh-hant") || /^zh-(tw|hk|mo)\b/.test(t)) return "zh-Hant";
  return null;
}
