// Tally's page-view tracker (docs/tracker.md). No cookies, no storage written, nothing that
// identifies a person: it sends the page URL (no user info, port or query but UTM fields), the
// referrer, the viewport width and the time.
// <script defer src="https://<api>/tally.js" data-key="<ingest key>"></script>, <api> with its base
// path (https://<id>.execute-api.<region>.amazonaws.com/api): the beacon goes beside the script.
// Optional: data-site (the site counted, default the page's host), data-hash (hash routing: the
// route's path, not its query), data-allow-local (count localhost too). Opt out in your own
// browser: localStorage.tally_ignore = "true" (read, never written). A page not counted or a
// beacon refused logs one console warning "tally: ...".
(function (w, d) {
  var s = d.currentScript, l = w.location, h = w.history, last;
  if (!s) return;
  var a = function (n) { return s.getAttribute("data-" + n); };
  var warn = function (m) { try { w.console.warn("tally: " + m); } catch (e) {} };
  var api = new URL("beacon/pageview", s.src) + "?key=" + encodeURIComponent(a("key") || "");
  var off = function () {
    try { if (w.localStorage.getItem("tally_ignore") === "true") return "localStorage.tally_ignore is set"; } catch (e) {}
    if (!a("key")) return "the script tag has no data-key";
    if ((/^(localhost|127\.|\[::1\]$)/.test(l.hostname) || l.protocol === "file:") && a("allow-local") === null)
      return "a local page (" + (l.hostname || l.protocol) + ") needs data-allow-local";
  };
  var url = function () {
    var q = new URLSearchParams(l.search), u = new URLSearchParams();
    ["source", "medium", "campaign"].forEach(function (k) { k = "utm_" + k; if (q.has(k)) u.set(k, q.get(k)); });
    u = "" + u;
    return l.protocol + "//" + l.hostname + l.pathname + (u && "?" + u) + (a("hash") === null ? "" : l.hash.split("?")[0]);
  };
  var send = function (event, o) {
    var why = off();
    if (why) return warn(why + ": not counted");
    var b = { url: url(), referrer: d.referrer || null, width: w.innerWidth, time: Date.now() };
    if (a("site")) b.site = a("site");
    if (event) { b.event = event; o = o || {}; b.dimensions = o.dimensions; b.values = o.values; }
    else if (b.url === last) return;
    else last = b.url;
    b = JSON.stringify(b);
    var no = function (m) { warn("the beacon was refused (" + m + "): not counted"); };
    // fetch first: sendBeacon never sees the answer.
    if (w.fetch) w.fetch(api, { method: "POST", body: b, keepalive: true, credentials: "omit" })
      .then(function (r) { if (!r.ok) no("HTTP " + r.status); }, function () { no("no readable answer"); });
    else if (w.navigator.sendBeacon) w.navigator.sendBeacon(api, b);
  };
  var view = function () { send(); };
  ["pushState", "replaceState"].forEach(function (m) {
    var f = h[m];
    h[m] = function () { var r = f.apply(this, arguments); view(); return r; };
  });
  w.addEventListener("popstate", view);
  if (a("hash") !== null) w.addEventListener("hashchange", view);
  w.tally = function (name, o) { send(name, o); };
  view();
})(window, document);
