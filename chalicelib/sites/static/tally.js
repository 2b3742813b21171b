// Tally's page-view tracker (docs/tracker.md). No cookies, no storage written, nothing that
// identifies a person: it sends the page URL, the referrer, the viewport width and the time.
// <script defer src="https://<api>/tally.js" data-key="<ingest key>"></script>, <api> with its base
// path (https://<id>.execute-api.<region>.amazonaws.com/api): the beacon goes beside the script.
// Optional: data-site (the site counted, default the page's host), data-hash (hash routing),
// data-allow-local (count localhost too). Opt out in your own browser:
// localStorage.tally_ignore = "true" (read here, never written).
(function (w, d) {
  var s = d.currentScript, l = w.location, h = w.history, last;
  if (!s) return;
  var a = function (n) { return s.getAttribute("data-" + n); };
  var api = new URL("beacon/pageview", s.src) + "?key=" + encodeURIComponent(a("key") || "");
  var off = function () {
    try { if (w.localStorage.getItem("tally_ignore") === "true") return 1; } catch (e) {}
    return (/^(localhost|127\.|\[::1\]$)/.test(l.hostname) || l.protocol === "file:") && a("allow-local") === null;
  };
  var send = function (event, o) {
    if (off()) return;
    var b = { url: a("hash") === null ? l.href.split("#")[0] : l.href, referrer: d.referrer || null,
      width: w.innerWidth, time: Date.now() };
    if (a("site")) b.site = a("site");
    if (event) { b.event = event; o = o || {}; b.dimensions = o.dimensions; b.values = o.values; }
    else if (b.url === last) return;
    else last = b.url;
    b = JSON.stringify(b);
    if (!(w.navigator.sendBeacon && w.navigator.sendBeacon(api, b)))
      w.fetch(api, { method: "POST", body: b, keepalive: true, credentials: "omit" }).catch(function () {});
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
