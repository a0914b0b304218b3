// The countdown.v1 contract that the page and the server share: one source.
// The server's unit tests read the object passed to Object.freeze below and
// fail when Swift and it differ, so keep it strict JSON (double-quoted keys,
// no comments, no trailing commas) and keep it the last thing in this file.
export const CONTRACT = Object.freeze({
  "subprotocol": "countdown.v1",
  "sessionIdPattern": "^[A-Za-z0-9_-]{1,64}$",
  "sessionIdMaxLength": 64,
  "seconds": { "min": 1, "max": 86400 },
  "adjustSeconds": { "min": -86400, "max": 86400 },
  "untilAheadMs": { "min": 1000, "max": 2592000000 },
  "epochMs": { "min": 0, "max": 253402300799999 },
  "durationSeconds": { "min": 0, "max": 2147483647 },
  "idMaxLength": { "string": 128 },
  "pingTMaxLength": 32,
  "errorEchoMaxLength": 32,
  "finishedLabelMaxLength": 64,
  "maxMessageBytes": 4096,
  "phases": ["idle", "running", "paused", "finished", "waiting", "overtime"],
  "labels": { "idle": "Ready", "finished": "Countdown finished", "waiting": "Waiting", "done": "Done", "failed": "Failed", "timeout": "Timed out", "stopped": "Countdown finished" },
  "outcomes": ["elapsed", "done", "failed", "timeout", "stopped"],
  "timeoutSeconds": { "min": 1, "max": 86400 },
  "waitLabelMaxLength": 64,
  "ops": ["start", "cancel", "pause", "resume", "adjust", "ping", "auth", "rotate_key", "wait", "done", "fail", "stop", "message", "blackout"],
  "errorCodes": [
    "bad_json", "bad_request", "busy", "not_running", "not_paused", "rate_limited",
    "forbidden", "too_many_sessions", "unavailable", "outcome_unknown", "not_waiting"
  ],
  "closeCodes": {
    "goingAway": 1001,
    "unsupportedData": 1003,
    "invalidPayload": 1007,
    "policyViolation": 1008,
    "messageTooBig": 1009,
    "internalError": 1011,
    "tryAgainLater": 1013
  },
  "levels": ["normal", "warning", "danger", "over"],
  "levelSeconds": { "min": 1, "max": 86400 },
  "messageMaxLength": 140,
  "maxOvertimeSeconds": 86400,
  "noRetryReason": "no-retry",
  "qrTextMaxBytes": 512
});
