/* opsconsole console: progressive enhancement only (every page works without it).
 * - live fragments: elements with data-live="name" (and data-live-every="seconds") are refreshed by one
 *   request per tick for all fragments due (`?_live=a,b`), so a burst of changes is one update; paused while
 *   the tab is hidden; a changed fragment is swapped in (server-rendered, escaped HTML).
 * - relative times: <time data-rel> kept current; absolute time in the title.
 * - select-all checkbox of the resources table; "/" focuses the search box.
 */
(function () {
  "use strict";

  function ago(seconds) {
    var s = Math.abs(seconds);
    if (s < 60) return Math.floor(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) return Math.floor(s / 3600) + " h";
    return Math.floor(s / 86400) + " d";
  }

  function refreshTimes(root) {
    var nodes = (root || document).querySelectorAll("time[data-rel]");
    var now = Date.now();
    for (var i = 0; i < nodes.length; i++) {
      var t = Date.parse(nodes[i].getAttribute("datetime"));
      if (isNaN(t)) continue;
      var delta = (now - t) / 1000;
      nodes[i].textContent = delta < -1 ? "in " + ago(delta) : ago(delta) + nodes[i].getAttribute("data-rel");
    }
  }

  var last = {};
  var due = {};
  var status = null;

  function setStatus(ok) {
    if (!status) return;
    status.textContent = ok ? "live" : "offline: retrying";
    status.className = ok ? "live-status" : "live-status offline";
  }

  function tick() {
    if (document.hidden) return;
    var now = Date.now();
    var names = [];
    var els = document.querySelectorAll("[data-live]");
    for (var i = 0; i < els.length; i++) {
      var name = els[i].getAttribute("data-live");
      var every = parseFloat(els[i].getAttribute("data-live-every") || "3") * 1000;
      if (!due[name]) due[name] = now + every;
      if (now >= due[name]) { names.push(name); due[name] = now + every; }
    }
    if (!names.length) return;
    var url = new URL(window.location.href);
    url.searchParams.set("_live", names.join(","));
    url.hash = "";
    fetch(url.toString(), { headers: { "Accept": "application/json" }, credentials: "same-origin" })
      .then(function (r) {
        if (r.redirected || !r.ok) throw new Error("status " + r.status);
        return r.json();
      })
      .then(function (data) {
        setStatus(true);
        var frags = data.fragments || {};
        Object.keys(frags).forEach(function (name) {
          if (last[name] === frags[name]) return;
          var el = document.querySelector('[data-live="' + name + '"]');
          if (!el) return;
          // never swap a form out while someone is filling it in
          if (el.contains(document.activeElement) && /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)) return;
          var checked = {};
          el.querySelectorAll("input[type=checkbox]:checked").forEach(function (c) { checked[c.value] = true; });
          var open = {};  // expanded <details> (a collapsed run group, a span) stay expanded across refreshes
          el.querySelectorAll("details[id][open]").forEach(function (d) { open[d.id] = true; });
          last[name] = frags[name];
          el.innerHTML = frags[name];
          el.querySelectorAll("input[type=checkbox]").forEach(function (c) { if (checked[c.value]) c.checked = true; });
          el.querySelectorAll("details[id]").forEach(function (d) { if (open[d.id]) d.open = true; });
          refreshTimes(el);
        });
      })
      .catch(function () { setStatus(false); });
  }

  document.addEventListener("change", function (ev) {
    var t = ev.target;
    if (t.classList && t.classList.contains("select-all")) {
      var table = t.closest("table");
      table.querySelectorAll('input[name="ids"]').forEach(function (c) { c.checked = t.checked; });
    }
    if (t.hasAttribute && t.hasAttribute("data-autosubmit") && t.form) t.form.submit();  // the cluster picker
  });

  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "/" || ev.ctrlKey || ev.metaKey) return;
    var tag = (document.activeElement && document.activeElement.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    var search = document.getElementById("search");
    if (search) { ev.preventDefault(); search.focus(); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    status = document.getElementById("live-status");
    refreshTimes(document);
    if (document.querySelector("[data-live]")) {
      setStatus(true);
      setInterval(tick, 500);
    }
    setInterval(function () { refreshTimes(document); }, 15000);
  });
})();
