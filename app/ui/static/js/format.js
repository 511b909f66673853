// Formatting of times, durations, counts and sizes for display.

const pad = (n) => String(n).padStart(2, "0");

export function time(ts) {
  if (ts === null || ts === undefined) return "—";
  const d = new Date(ts * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export const count = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));

export function rate(perSecond) {
  if (perSecond === null || perSecond === undefined || !Number.isFinite(perSecond)) return "—";
  return perSecond >= 100 ? count(Math.round(perSecond)) : perSecond.toFixed(perSecond >= 10 ? 1 : 2);
}

export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(value >= 10 ? 0 : 1)} ${units[unit]}`;
}

// Which API a batch was made through: Message Batches run Anthropic's `/v1/messages` lines.
export const api = (batch) => (batch.endpoint === "/v1/messages" ? "Anthropic Message Batch" : "OpenAI batch");
