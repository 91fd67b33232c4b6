// The console's one script: keep the page live. The server sends the page's live part again
// (server-rendered, escaped HTML) over server-sent events whenever the session changes; this
// swaps it in, keeping open what the reader opened, and waits while they fill in a form.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !live.dataset.events || !window.EventSource) return;
  let waiting = null;

  function typing() {
    const active = document.activeElement;
    return active && live.contains(active) && active.closest("form");
  }

  function swap(html) {
    const open = new Set();
    live.querySelectorAll("details[id][open]").forEach((d) => open.add(d.id));
    const closed = new Set();
    live.querySelectorAll("details[id]:not([open])").forEach((d) => closed.add(d.id));
    live.innerHTML = html;
    live.querySelectorAll("details[id]").forEach((d) => {
      if (open.has(d.id)) d.open = true;
      if (closed.has(d.id)) d.open = false;
    });
  }

  live.addEventListener("focusout", () => {
    setTimeout(() => {
      if (waiting !== null && !typing()) { swap(waiting); waiting = null; }
    }, 0);
  });

  const source = new EventSource(live.dataset.events);
  source.addEventListener("update", (event) => {
    if (typing()) { waiting = event.data; return; }
    swap(event.data);
  });
})();
