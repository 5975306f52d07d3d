// The inbox's live updates: the page's element with data-live names its
// event stream; each "change" event (data: a conversation's id) makes the
// script read the page again and swap in its live regions (ids live-…),
// so new messages, suggestions and badges appear without a reload. A
// region holding the field being typed in is left alone. Without this
// script every page works by reloading, and every action is a plain form.
(function () {
  "use strict";
  var live = document.querySelector("[data-live]");
  if (!live || !window.EventSource || !window.fetch || !window.DOMParser) { return; }
  var conversation = live.getAttribute("data-conversation");
  var regions = ["live-list", "live-messages", "live-suggestion", "live-state", "live-runs"];
  var status = document.getElementById("live-status");
  var running = false, again = false;

  function typingIn(el) {
    var active = document.activeElement;
    return active && el.contains(active) && /^(TEXTAREA|INPUT|SELECT)$/.test(active.tagName);
  }

  function swap(doc) {
    regions.forEach(function (id) {
      var now = document.getElementById(id), next = doc.getElementById(id);
      if (!now || !next || typingIn(now)) { return; }
      var nodes = Array.prototype.map.call(next.childNodes, function (n) { return document.importNode(n, true); });
      now.replaceChildren.apply(now, nodes);
    });
    document.body.setAttribute("data-live-updated", String(Date.now()));
    if (status) { status.textContent = "Updated " + new Date().toLocaleTimeString(); }
  }

  function redraw() {
    if (running) { again = true; return; }
    running = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.text();
      })
      .then(function (html) { swap(new DOMParser().parseFromString(html, "text/html")); })
      .catch(function () { /* the next change, or a reload, tries again */ })
      .then(function () {
        running = false;
        if (again) { again = false; redraw(); }
      });
  }

  var events = new EventSource(live.getAttribute("data-live"));
  events.addEventListener("ready", function () { document.body.setAttribute("data-live-ready", "1"); });
  events.addEventListener("change", function (e) {
    if (conversation && e.data !== conversation) { return; }
    redraw();
  });
})();
