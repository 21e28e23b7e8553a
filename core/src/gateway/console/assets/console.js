// skillbox console: live updates of the pending approvals (no framework, no build step).
// The page is complete without this script; it only refreshes the pending list every
// 1.5 s from /console/approvals/live, a fragment rendered by the server (with each
// form's CSRF token), so a new approval shows within 3 s without a reload.
(function () {
  "use strict";
  var list = document.getElementById("pending");
  if (!list || !list.hasAttribute("data-live")) {
    return;
  }
  var interval = 1500;
  var busy = false;
  // Not while the operator is at a card: typing a reason, or having ticked "I have read
  // the warnings" (a refresh would untick it).
  function typing() {
    var active = document.activeElement;
    if (list.querySelector("input[type=checkbox]:checked")) {
      return true;
    }
    return active && list.contains(active) && active.tagName === "INPUT" && active.value !== "";
  }
  function refresh() {
    if (busy || typing()) {
      return;
    }
    busy = true;
    fetch("/console/approvals/live", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 303 || r.redirected || !r.ok) {
          throw new Error("session ended");
        }
        return r.text();
      })
      .then(function (html) {
        if (list.getAttribute("data-html") !== html) {
          list.innerHTML = html;
          list.setAttribute("data-html", html);
          var count = list.querySelectorAll("[data-approval]").length;
          var badge = document.getElementById("pending-count");
          if (badge) {
            badge.textContent = String(count);
          }
        }
      })
      .catch(function () {
        var note = document.getElementById("live-status");
        if (note) {
          note.textContent = "Live updates stopped: reload the page (or sign in again).";
        }
      })
      .then(function () {
        busy = false;
      });
  }
  window.setInterval(refresh, interval);
})();
