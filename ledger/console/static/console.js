// The live feed (Server-Sent Events) and nothing else: every value is set as
// text (textContent), never as markup, so a caller-chosen id stays text.
"use strict";
(function () {
  if (document.body.dataset.page !== "live") return;
  const body = document.querySelector("#live tbody");
  const state = document.getElementById("feed-state");
  const pause = document.getElementById("pause");
  let paused = false;
  const held = [];
  const usd = (m) => (m === null || m === undefined ? "" : "$" + (m / 1e6).toFixed(6));
  function row(e) {
    const tr = document.createElement("tr");
    tr.className = "new";
    tr.dataset.kind = e.kind;
    tr.dataset.ref = e.verdict_ref || "";
    const cells = [e.time, e.kind, e.verdict || "", e.deciding_cap || "", e.provider || "",
      e.model || "", e.agent || "", e.session || "", e.key || "", (e.tags || []).join(", "),
      e.client || "", usd(e.estimated_micros), usd(e.actual_micros), e.clamped_tokens || ""];
    for (const value of cells) {
      const td = document.createElement("td");
      td.textContent = String(value);
      tr.appendChild(td);
    }
    body.insertBefore(tr, body.firstChild);
    while (body.children.length > 500) body.removeChild(body.lastChild);
  }
  pause.addEventListener("click", function () {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    if (!paused) while (held.length) row(held.shift());
  });
  const source = new EventSource("/console/api/live");
  source.addEventListener("open", function () { state.textContent = "live"; });
  source.addEventListener("error", function () { state.textContent = "reconnecting…"; });
  source.addEventListener("message", function (message) {
    const e = JSON.parse(message.data);
    if (paused) held.push(e); else row(e);
  });
})();
