/* The page's own script (served from 'self': no inline script, no eval, no inline handlers).
 *
 * - A banner while the live refresh fails (server error or no connection), hidden
 *   again by the next refresh that works.
 * - The same banner when a refresh goes unanswered (a server that hangs): a poll
 *   missed for two intervals, or one given up by htmx's timeout (hx-request).
 * - "Updated hh:mm:ss UTC": what the page's data is as of. A poll that answers for all the
 *   page shows (data-covers="page") moves it on every answer, "nothing changed" included;
 *   a page whose poll covers only the nav ("nav") keeps the time it was drawn ("Loaded").
 * - Selects marked data-autosubmit submit their form when changed.
 */
(function () {
  "use strict";

  function isPoll(event) {
    var elt = event.detail && event.detail.elt;
    return Boolean(elt && elt.id === "live-poll");
  }

  var lastHeard = Date.now();

  function utc(ms) {
    return new Date(ms).toISOString().slice(11, 19) + " UTC";
  }

  function banner(show, why) {
    var el = document.getElementById("live-banner");
    if (el) {
      el.hidden = !show;
    }
    var reason = document.getElementById("live-banner-why");
    if (reason && why) {
      reason.textContent = why;
    }
  }

  function heard(coversPage) {
    lastHeard = Date.now();
    var at = document.getElementById("live-updated-at");
    if (at && coversPage) {
      at.textContent = utc(lastHeard);
      at.setAttribute("datetime", new Date(lastHeard).toISOString());
    }
    banner(false);
  }

  function silence() {
    return "no answer since " + utc(lastHeard);
  }

  document.addEventListener("htmx:responseError", function (event) {
    if (isPoll(event)) banner(true, "the last refresh failed");
  });
  document.addEventListener("htmx:sendError", function (event) {
    if (isPoll(event)) banner(true, "the server can't be reached (" + silence() + ")");
  });
  document.addEventListener("htmx:timeout", function (event) {
    if (isPoll(event)) banner(true, "the server did not answer (" + silence() + ")");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (isPoll(event) && event.detail.successful) heard(event.detail.elt.getAttribute("data-covers") !== "nav");
  });

  // A poll that never comes back (a hung server) fires none of the above until htmx's
  // timeout: two intervals without an answer already make the page stale.
  window.setInterval(function () {
    var poll = document.getElementById("live-poll");
    var every = poll ? parseInt(poll.getAttribute("data-poll-ms") || "0", 10) : 0;
    if (every > 0 && !document.hidden && Date.now() - lastHeard > 2 * every + 1000) {
      banner(true, silence());
    }
  }, 1000);

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target instanceof HTMLSelectElement && target.hasAttribute("data-autosubmit") && target.form) {
      target.form.requestSubmit();
    }
  });
})();
