// Live status of a submission page: while the verdict is pending, fetch the server-rendered
// status fragment once a second and swap it in (no page reload). Stops at the verdict.
(function () {
  "use strict";
  var box = document.getElementById("live");
  if (!box || box.dataset.final === "1") return;
  var delay = 1000;
  function poll() {
    fetch(box.dataset.url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        box.innerHTML = html;
        var status = document.getElementById("status");
        if (status && status.dataset.final === "1") { box.dataset.final = "1"; return; }
        delay = 1000;
        setTimeout(poll, delay);
      })
      .catch(function () { delay = Math.min(delay * 2, 15000); setTimeout(poll, delay); });
  }
  setTimeout(poll, delay);
})();
